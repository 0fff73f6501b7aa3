package cycle

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/repoaccess/repourl"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// Event reasons.
const (
	ReasonImagesUpdated = "ImagesUpdated"
	// ReasonChartsUpdated: new chart versions written (chart-list), or
	// new tags of git sources (git-tag-list).
	ReasonChartsUpdated = "ChartsUpdated"
	ReasonInvalidConfig = "InvalidConfiguration"
	ReasonUpdateFailed  = "UpdateFailed"
	// ReasonSignatureNotVerified: a new version was passed over for
	// want of a valid signature.
	ReasonSignatureNotVerified = "SignatureNotVerified"
	// ReasonVersionWaiting tells of a newer version held back (its
	// minimum release age, its Application's update windows, its stage),
	// once.
	ReasonVersionWaiting = "VersionWaiting"
)

// maxEventMessage keeps events under the API server's 1 KiB note limit
// with room for the recorder's own additions.
const maxEventMessage = 1000

// EventReporter records Kubernetes events on Applications. A problem is
// reported when it first appears, not every cycle it persists; a problem
// that goes away and comes back is reported again.
type EventReporter struct {
	recorder record.EventRecorder
	mu       sync.Mutex
	previous map[string]map[string]bool // application -> messages reported last cycle
	current  map[string]map[string]bool
}

// NewEventReporter reports through recorder.
func NewEventReporter(recorder record.EventRecorder) *EventReporter {
	return &EventReporter{recorder: recorder, previous: map[string]map[string]bool{}, current: map[string]map[string]bool{}}
}

// beginCycle starts a new round of deduplication.
func (e *EventReporter) beginCycle() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.previous, e.current = e.current, map[string]map[string]bool{}
}

func (e *EventReporter) problems(app *application.Application, problems []error) {
	if e == nil || len(problems) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range problems {
		msg := p.Error()
		if !e.first(app, msg) {
			continue
		}
		reason := ReasonUpdateFailed
		var problem settings.Problem
		var config configError
		if errors.As(p, &problem) || errors.As(p, &config) || errors.Is(p, writeback.ErrInvalidTarget) {
			reason = ReasonInvalidConfig
		}
		e.recorder.Event(app.Object(), corev1.EventTypeWarning, reason, truncate(msg))
	}
}

// first records msg for app in this cycle and reports whether it is new:
// neither reported already this cycle nor the cycle before. The caller
// holds e.mu.
func (e *EventReporter) first(app *application.Application, msg string) bool {
	key := app.Key()
	if e.current[key] == nil {
		e.current[key] = map[string]bool{}
	}
	if e.current[key][msg] {
		return false
	}
	e.current[key][msg] = true
	return !e.previous[key][msg]
}

// signaturesSkipped reports the new versions of image passed over for
// their signatures, one Warning event for each version when first seen.
func (e *EventReporter) signaturesSkipped(app *application.Application, image string, skipped []Skipped) {
	if e == nil || len(skipped) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range skipped {
		msg := fmt.Sprintf("image %s: version %s (%s) skipped: %s", image, s.Tag, s.Digest, s.Reason)
		if e.first(app, msg) {
			e.recorder.Event(app.Object(), corev1.EventTypeWarning, ReasonSignatureNotVerified, truncate(msg))
		}
	}
}

// waiting reports a version held back, told by msg: one Normal event
// when first seen waiting.
func (e *EventReporter) waiting(app *application.Application, msg string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first(app, msg) {
		e.recorder.Event(app.Object(), corev1.EventTypeNormal, ReasonVersionWaiting, truncate(msg))
	}
}

// imagesUpdated reports a write-back; trigger, when not empty, says what
// asked for the targeted check that found the new versions.
func (e *EventReporter) imagesUpdated(app *application.Application, changed []writeback.ImageUpdate, trigger string) {
	if e == nil || len(changed) == 0 {
		return
	}
	lines := make([]string, 0, len(changed))
	for _, c := range changed {
		lines = append(lines, fmt.Sprintf("%s from '%s' to '%s'", c.Image.OriginalName(), c.Old, c.New))
	}
	e.recorder.AnnotatedEventf(app.Object(), imagesUpdatedAnnotations(changed), corev1.EventTypeNormal, ReasonImagesUpdated,
		"%s", updatedMessage("image", lines, trigger))
}

// updatedMessage is the message of an update event: what was updated,
// one line each, and the trigger of the targeted check, if any.
func updatedMessage(what string, lines []string, trigger string) string {
	sort.Strings(lines)
	after := ""
	if trigger != "" {
		after = " after " + trigger
	}
	return truncate(fmt.Sprintf("updated %d %s(s)%s: %s", len(lines), what, after, strings.Join(lines, "; ")))
}

// chartsUpdated reports the charts of a write-back.
func (e *EventReporter) chartsUpdated(app *application.Application, changed []writeback.ChartUpdate, trigger string) {
	if e == nil || len(changed) == 0 {
		return
	}
	lines := make([]string, 0, len(changed))
	for _, c := range changed {
		line := fmt.Sprintf("%s from '%s' to '%s'", c.Chart, c.Old, c.New)
		if c.GitTag {
			line = "git source " + repourl.RedactURL(c.Chart) + fmt.Sprintf(" from '%s' to '%s'", c.Old, c.New)
		}
		lines = append(lines, line)
	}
	e.recorder.Event(app.Object(), corev1.EventTypeNormal, ReasonChartsUpdated, updatedMessage("chart", lines, trigger))
}

// imagesUpdatedAnnotations are the annotations Argo CD Image Updater set on
// its ImagesUpdated events, which alerting built on them reads: four per
// changed image, numbered from 0 in image-list order.
func imagesUpdatedAnnotations(changed []writeback.ImageUpdate) map[string]string {
	a := make(map[string]string, 4*len(changed))
	for i, c := range changed {
		r := c.Reported()
		prefix := fmt.Sprintf("argocd-image-updater.image-%d/", i)
		a[prefix+"full-image-name"] = r.FullName
		a[prefix+"image-name"] = r.Name
		a[prefix+"old-tag"] = r.OldTag
		a[prefix+"new-tag"] = r.NewTag
	}
	return a
}

// truncate cuts s to maxEventMessage bytes, at the start of a character
// so that the message stays valid UTF-8.
func truncate(s string) string {
	if len(s) <= maxEventMessage {
		return s
	}
	cut := maxEventMessage - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
