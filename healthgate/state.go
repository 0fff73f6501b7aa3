package healthgate

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
)

// State is what the gate keeps of one Application: for each image, the
// last version written under the gate, and the versions it skips. It is
// kept where it survives a restart: in the Application's
// health-gate-state annotation (as JSON), or in the status of the
// ImageUpdater that configures the Application (healthGate and
// skippedVersions, each entry naming the Application).
type State struct {
	Records []api.HealthGateRecord `json:"records,omitempty"`
	Skipped []api.SkippedVersion   `json:"skipped,omitempty"`
}

// Bounds of a State: the annotation and the status are written by the
// controller, but a tenant may edit the annotation, and every message
// quotes Argo CD, which quotes the tenant's manifests.
const (
	// MaxStateBytes bounds the annotation, read and written.
	MaxStateBytes = 32 << 10
	// MaxSkippedPerImage keeps the most recent skipped versions of an
	// image.
	MaxSkippedPerImage = 10
	maxMessage         = 512
	maxField           = 256
)

// ParseState reads the health-gate-state annotation. A value that is too
// large or not a State is an error, and the gate starts afresh for that
// Application; entries without an alias or version are dropped.
func ParseState(s string) (State, error) {
	var st State
	if s == "" {
		return st, nil
	}
	if len(s) > MaxStateBytes {
		return State{}, fmt.Errorf("%d bytes, more than the %d it may hold", len(s), MaxStateBytes)
	}
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return State{}, fmt.Errorf("not the health gate's state: %w", err)
	}
	st.normalize("")
	return st, nil
}

// Encode is the annotation's value; "" for an empty State.
func (st State) Encode() string {
	if len(st.Records) == 0 && len(st.Skipped) == 0 {
		return ""
	}
	b, err := json.Marshal(st)
	if err != nil {
		// Only strings and times: Marshal cannot fail.
		return ""
	}
	return string(b)
}

// normalize bounds and orders st, keeping only the entries of application
// ("" for any) that name an image and a version: one record per image,
// the most recent skips of each image. Records are sorted by image, skips
// by image and time.
func (st *State) normalize(application string) {
	seen := map[string]bool{}
	records := st.Records[:0]
	for _, r := range st.Records {
		if r.Alias == "" || r.Version == "" || seen[r.Alias] || application != "" && r.Application != application || len(records) == settings.MaxImages {
			continue
		}
		seen[r.Alias] = true
		r.Alias, r.Image, r.Version, r.PreviousVersion = clip(r.Alias, maxField), clip(r.Image, maxField), clip(r.Version, maxField), clip(r.PreviousVersion, maxField)
		r.Window, r.Commit, r.HealthBefore = clip(r.Window, 32), clip(r.Commit, 64), clip(r.HealthBefore, 32)
		r.Message = clip(r.Message, maxMessage)
		records = append(records, r)
	}
	st.Records = slices.Clip(records)
	sort.SliceStable(st.Records, func(i, j int) bool { return st.Records[i].Alias < st.Records[j].Alias })

	skipped := st.Skipped[:0]
	for _, s := range st.Skipped {
		if s.Alias == "" || s.Version == "" || application != "" && s.Application != application {
			continue
		}
		s.Alias, s.Version, s.Reason = clip(s.Alias, maxField), clip(s.Version, maxField), clip(s.Reason, maxMessage)
		skipped = append(skipped, s)
	}
	sort.SliceStable(skipped, func(i, j int) bool {
		if skipped[i].Alias != skipped[j].Alias {
			return skipped[i].Alias < skipped[j].Alias
		}
		return skipped[i].SkippedAt.Before(&skipped[j].SkippedAt)
	})
	// The most recent MaxSkippedPerImage of each image, each version once.
	var kept []api.SkippedVersion
	for i := len(skipped) - 1; i >= 0; i-- {
		s := skipped[i]
		n := 0
		dup := false
		for _, k := range kept {
			if k.Alias == s.Alias {
				n++
				dup = dup || k.Version == s.Version
			}
		}
		if !dup && n < MaxSkippedPerImage && len(kept) < settings.MaxImages*MaxSkippedPerImage {
			kept = append(kept, s)
		}
	}
	slices.Reverse(kept)
	st.Skipped = kept
	for size := len(st.Encode()); size > MaxStateBytes; {
		n := st.dropOldest()
		if n == 0 {
			break
		}
		size -= n
	}
}

// dropOldest removes the oldest entry that is not being followed: a
// record already judged, else a skip. It returns the size of the entry
// in the encoded State, 0 when nothing is left to remove.
func (st *State) dropOldest() int {
	size := func(v any) int {
		b, _ := json.Marshal(v)
		return len(b) + len(",")
	}
	oldest := -1
	for i, r := range st.Records {
		if active(r) {
			continue
		}
		if oldest < 0 || r.WrittenAt.Before(&st.Records[oldest].WrittenAt) {
			oldest = i
		}
	}
	if oldest >= 0 {
		n := size(st.Records[oldest])
		st.Records = slices.Delete(st.Records, oldest, oldest+1)
		return n
	}
	for i, s := range st.Skipped {
		if oldest < 0 || s.SkippedAt.Before(&st.Skipped[oldest].SkippedAt) {
			oldest = i
		}
	}
	if oldest >= 0 {
		n := size(st.Skipped[oldest])
		st.Skipped = slices.Delete(st.Skipped, oldest, oldest+1)
		return n
	}
	return 0
}

// active tells whether a record is still followed.
func active(r api.HealthGateRecord) bool {
	return r.State == api.HealthGatePending || r.State == api.HealthGateReverting
}

// record is the record of image, or nil.
func (st *State) record(image string) *api.HealthGateRecord {
	for i := range st.Records {
		if st.Records[i].Alias == image {
			return &st.Records[i]
		}
	}
	return nil
}

// setRecord replaces the record of r's image with r.
func (st *State) setRecord(r api.HealthGateRecord) {
	if old := st.record(r.Alias); old != nil {
		*old = r
		return
	}
	st.Records = append(st.Records, r)
}

// skip adds version to the skipped versions of image.
func (st *State) skip(image, version, reason string, at time.Time) {
	st.Skipped = slices.DeleteFunc(st.Skipped, func(s api.SkippedVersion) bool { return s.Alias == image && s.Version == version })
	st.Skipped = append(st.Skipped, api.SkippedVersion{Alias: image, Version: version, SkippedAt: metav1.NewTime(at.Truncate(time.Second)), Reason: reason})
}

// skippedVersions are the versions of image skipped.
func (st *State) skippedVersions(image string) []imageref.Version {
	var out []imageref.Version
	for _, s := range st.Skipped {
		if s.Alias == image {
			out = append(out, imageref.ParseVersion(s.Version))
		}
	}
	return out
}

// Clear removes the skipped versions a health-gate-clear value names:
// "all", or entries "<version>" (of any image) or "<alias>:<version>",
// separated by commas. It returns what it removed, as "<alias>:<version>".
func (st *State) Clear(value string) []string {
	var all bool
	var versions, pairs []string
	for e := range strings.SplitSeq(value, ",") {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case e == "all":
			all = true
		case isPair(e):
			pairs = append(pairs, e)
		default:
			versions = append(versions, e)
		}
	}
	var cleared []string
	st.Skipped = slices.DeleteFunc(st.Skipped, func(s api.SkippedVersion) bool {
		if all || slices.Contains(versions, s.Version) || slices.Contains(pairs, s.Alias+":"+s.Version) {
			cleared = append(cleared, s.Alias+":"+s.Version)
			return true
		}
		return false
	})
	return cleared
}

// isPair tells "<alias>:<version>" from a version: a tag holds no ':', and
// a digest's algorithm comes after an '@' or alone ("sha256:...").
func isPair(e string) bool {
	alias, _, ok := strings.Cut(e, ":")
	return ok && !strings.Contains(alias, "@") && !strings.HasPrefix(e, "sha256:")
}

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
