package cycle

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// Observer learns what each update cycle did, for example to report it in
// the status of the resources that configured the Applications.
type Observer interface {
	// CycleDone is called when a cycle that started at start has written
	// everything, with a result for every Application it planned. only
	// names the ImageUpdaters a check was limited to (CheckImageUpdaters);
	// nil after a full cycle, which covers them all.
	CycleDone(ctx context.Context, start time.Time, results []AppResult, only []types.NamespacedName)
}

// AppResult is what one cycle did for one Application.
type AppResult struct {
	App *application.Application
	// Errors are the problems that kept an image (or the Application)
	// from being checked or written; warnings are not among them.
	Errors []error
	// Updated are the new versions written.
	Updated []writeback.ImageUpdate
	// Waiting are the newer versions held back.
	Waiting []WaitingVersion
}

// WaitingVersion is a newer version of one image or chart held back.
type WaitingVersion struct {
	Key     string // the image's or chart's alias, else its name
	Chart   bool
	Version string
	Reason  string    // the versions_waiting metric's label
	Until   time.Time // zero: not known
	Message string    // the VersionWaiting event's, at most 1,000 bytes
}

// results collects AppResults while a cycle runs; a nil *results collects
// nothing.
type results struct {
	mu    sync.Mutex
	order []*AppResult
	byKey map[string]*AppResult
}

func newResults(apps []*application.Application) *results {
	r := &results{byKey: make(map[string]*AppResult, len(apps))}
	for _, app := range apps {
		ar := &AppResult{App: app}
		r.order = append(r.order, ar)
		r.byKey[app.Key()] = ar
	}
	return r
}

func (r *results) problems(app *application.Application, problems []error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ar, ok := r.byKey[app.Key()]
	if !ok {
		return
	}
	for _, p := range problems {
		if !isWarning(p) {
			ar.Errors = append(ar.Errors, p)
		}
	}
}

func (r *results) updated(app *application.Application, changed []writeback.ImageUpdate) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ar, ok := r.byKey[app.Key()]; ok {
		ar.Updated = append(ar.Updated, changed...)
	}
}

func (r *results) waiting(app *application.Application, w WaitingVersion) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ar, ok := r.byKey[app.Key()]; ok {
		w.Message = truncate(w.Message)
		ar.Waiting = append(ar.Waiting, w)
	}
}

func (r *results) list() []AppResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]AppResult, len(r.order))
	for i, ar := range r.order {
		out[i] = *ar
	}
	return out
}
