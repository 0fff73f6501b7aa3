package cycle

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// An event's message is at most maxEventMessage bytes, whatever the
// problem or the images it names, and stays valid UTF-8 when cut.
func TestEventMessageBound(t *testing.T) {
	app := planApp(t, "", nil, nil, nil)
	long := func(n int) []writeback.ImageUpdate {
		var out []writeback.ImageUpdate
		for range n {
			out = append(out, writeback.ImageUpdate{
				ImageSpec: settings.ImageSpec{Image: mustParse(t, "registry.example.com/team/"+strings.Repeat("a", 200))},
				Old:       imageref.ParseVersion("1.0.0"), New: imageref.Version{Tag: "1.0.1"},
			})
		}
		return out
	}
	tests := []struct {
		name   string
		report func(*EventReporter)
		whole  bool // the message is sent whole
	}{
		{"a short problem", func(e *EventReporter) { e.problems(app, []error{errors.New("registry unreachable")}) }, true},
		{"a problem of 5,000 characters", func(e *EventReporter) { e.problems(app, []error{errors.New(strings.Repeat("x", 5000))}) }, false},
		{"a problem of two-byte characters", func(e *EventReporter) { e.problems(app, []error{errors.New(strings.Repeat("é", 2000))}) }, false},
		{"twenty long image names updated", func(e *EventReporter) { e.imagesUpdated(app, long(20), "") }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &messages{}
			e := NewEventReporter(rec)
			e.beginCycle()
			tt.report(e)
			if len(rec.got) != 1 {
				t.Fatalf("events %q, want one", rec.got)
			}
			msg := rec.got[0]
			if len(msg) > maxEventMessage || !utf8.ValidString(msg) {
				t.Errorf("message of %d bytes (valid UTF-8: %v), want at most %d", len(msg), utf8.ValidString(msg), maxEventMessage)
			}
			if cut := strings.HasSuffix(msg, "..."); cut == tt.whole {
				t.Errorf("message %.60q... cut: %v, want %v", msg, cut, !tt.whole)
			}
		})
	}
}

// messages is an event recorder that keeps the messages of the events.
type messages struct{ got []string }

var _ record.EventRecorder = (*messages)(nil)

func (m *messages) Event(_ runtime.Object, _, _, message string) { m.got = append(m.got, message) }

func (m *messages) Eventf(_ runtime.Object, _, _, format string, args ...any) {
	m.got = append(m.got, fmt.Sprintf(format, args...))
}

func (m *messages) AnnotatedEventf(_ runtime.Object, _ map[string]string, _, _, format string, args ...any) {
	m.got = append(m.got, fmt.Sprintf(format, args...))
}
