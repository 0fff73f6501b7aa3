package settings

import (
	"fmt"
	"strings"
	"time"
)

// Stage is the Application an image is promoted from: the image takes
// only the version of its repository that the stage runs and whose
// health gate verified it, once the stage has run it for Soak.
type Stage struct {
	// Namespace and Name are the stage's; Namespace is "" for the image's
	// own Application's, the only one a stage may be in (the cycle
	// refuses another: whoever may edit an Application must not read the
	// versions of another tenant's Applications).
	Namespace, Name string
	Soak            time.Duration
	// Origin is where the stage is named; "" when it is not.
	Origin Origin
}

// IsZero tells whether no stage is named.
func (s Stage) IsZero() bool { return s.Name == "" }

// MaxSoak bounds a stage's soak time.
const MaxSoak = 30 * 24 * time.Hour

// ParseStage reads a promote-from value, "<application>" or
// "<namespace>/<application>", and a soak time (a duration or days, as a
// release age; "" for none).
func ParseStage(v, soak string) (Stage, error) {
	var st Stage
	ns, name, nested := strings.Cut(v, "/")
	if !nested {
		ns, name = "", v
	}
	if name == "" || strings.ContainsAny(name, "/ ") || len(name) > 253 || len(ns) > 63 {
		return Stage{}, fmt.Errorf("%.80q is not an Application (\"<application>\" or \"<namespace>/<application>\")", v)
	}
	st.Namespace, st.Name = ns, name
	if soak != "" {
		d, err := ParseReleaseAge(soak)
		if err != nil || d > MaxSoak {
			return Stage{}, fmt.Errorf("soak time %.40q is not a time from 0 to 30d (\"1h\", \"2d\")", soak)
		}
		st.Soak = d
	}
	return st, nil
}
