package settings

import (
	"fmt"
	"strings"
)

// DigestPin says whether the version written for an image carries the
// digest its tag points at ("1.4.2@sha256:..."), as Flux's
// digestReflectionPolicy does: pinned by digest, a version runs what was
// chosen even if its tag is pushed again.
type DigestPin int

const (
	// PinNever writes the tag alone: the default, and what Argo CD Image
	// Updater writes for every strategy but digest.
	PinNever DigestPin = iota
	// PinIfNotPresent pins a tag once: a version already pinned is kept
	// while its tag stays the chosen one, even when the tag moves.
	PinIfNotPresent
	// PinAlways pins the tag again each time it points at a new digest.
	PinAlways
)

var digestPinNames = [...]string{PinNever: "never", PinIfNotPresent: "if-not-present", PinAlways: "always"}

func (p DigestPin) String() string {
	if p < 0 || int(p) >= len(digestPinNames) {
		return fmt.Sprintf("DigestPin(%d)", int(p))
	}
	return digestPinNames[p]
}

// ParseDigestPin reads a pin-digest value: never, if-not-present or
// always, in any case; "" is never.
func ParseDigestPin(s string) (DigestPin, error) {
	if s == "" {
		return PinNever, nil
	}
	for p, name := range digestPinNames {
		if strings.EqualFold(s, name) {
			return DigestPin(p), nil
		}
	}
	return PinNever, fmt.Errorf("%.40q is not never, if-not-present or always", s)
}
