package cycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/internal/coalesce"
	"github.com/image-updater/argocd-image-updater/window"
)

// SyncWindows reads the sync windows of an AppProject, by name.
type SyncWindows interface {
	SyncWindows(ctx context.Context, project string) ([]window.ProjectWindow, error)
}

// WithSyncWindows reads the AppProjects' sync windows of the Applications
// that ask for them (use-sync-windows, useSyncWindows); without it such
// an Application writes nothing.
func WithSyncWindows(s SyncWindows) Option { return func(u *Updater) { u.syncWindows = s } }

// windowState is whether an Application's writes may be made now, and
// when they may if not (zero: not known to come within a year).
type windowState struct {
	open   bool
	opens  time.Time
	reason string
}

// projectWindows are the AppProjects' sync windows read in one pass: each
// AppProject once, however many Applications ask.
type projectWindows struct {
	calls coalesce.Group[[]window.ProjectWindow]
	mu    sync.Mutex
	read  map[string]projectRead
}

type projectRead struct {
	windows []window.ProjectWindow
	err     error
}

func (p *projectWindows) get(ctx context.Context, s SyncWindows, project string) ([]window.ProjectWindow, error) {
	p.mu.Lock()
	r, ok := p.read[project]
	p.mu.Unlock()
	if ok {
		return r.windows, r.err
	}
	ws, err := p.calls.Do(ctx, project, nil, func(ctx context.Context) ([]window.ProjectWindow, error) { return s.SyncWindows(ctx, project) })
	if ctx.Err() == nil {
		p.mu.Lock()
		if p.read == nil {
			p.read = map[string]projectRead{}
		}
		p.read[project] = projectRead{ws, err}
		p.mu.Unlock()
	}
	return ws, err
}

// windowState is app's window state now. It runs in the Application's own
// check, within its time: what its windows cost (an AppProject to read,
// the next opening to find) is its own.
func (r *run) windowState(ctx context.Context, app *application.Application) windowState {
	u, s := r.u, app.Settings
	if s.WindowsInvalid {
		return windowState{reason: "its update windows are not understood"}
	}
	set := s.Windows
	if s.UseSyncWindows {
		if u.syncWindows == nil {
			return windowState{reason: "it asks for its AppProject's sync windows, which this controller does not read"}
		}
		ws, err := r.projects.get(ctx, u.syncWindows, app.Project)
		var project window.Set
		if err == nil {
			d := app.Destination
			if project, err = window.Matching(ws, window.Target{Name: app.Name, Server: d.Server, Cluster: d.Name, DestinationNamespace: d.Namespace}); err != nil {
				err = fmt.Errorf("AppProject %s: %w", app.Project, err)
			}
		}
		if err != nil {
			// Fail closed: the windows asked for are not known.
			u.logger.Warn("the sync windows of an Application's AppProject could not be read; nothing is written for it", "application", app.Key(), "error", err)
			return windowState{reason: fmt.Sprintf("the sync windows of its AppProject could not be read: %v", err)}
		}
		set = append(append(window.Set{}, set...), project...)
	}
	now := u.now()
	if set.Open(now) {
		return windowState{open: true}
	}
	st := windowState{opens: set.Next(now)}
	st.reason = "outside its update windows"
	if !st.opens.IsZero() {
		st.reason += " until " + st.opens.UTC().Format(time.RFC3339)
	}
	return st
}

// heldByWindow keeps back the changes of an Application outside its
// windows, images and charts alike, and says so once for each; the pass
// then ends with a check when the first window opens.
func (r *run) heldByWindow(w *appWork, updates []*appUpdate) []*appUpdate {
	st := w.window
	if st.open || len(updates) == 0 {
		return updates
	}
	if !st.opens.IsZero() && (r.sum.NextWindow.IsZero() || st.opens.Before(r.sum.NextWindow)) {
		r.sum.NextWindow = st.opens
	}
	var held []WaitingVersion
	for _, au := range updates {
		for _, c := range au.changes {
			held = append(held, WaitingVersion{Key: c.Key(), Version: c.New.String(), Message: fmt.Sprintf("image %s: version %s waits: the Application is %s", c.Key(), c.New, st.reason)})
		}
		for _, c := range au.charts {
			held = append(held, WaitingVersion{Key: c.Key(), Chart: true, Version: c.New, Message: fmt.Sprintf("chart %s: version %s waits: the Application is %s", c.Key(), c.New, st.reason)})
		}
	}
	for _, h := range held {
		h.Reason, h.Until = waitingUpdateWindow, st.opens
		r.sum.WaitingWindow++
		r.u.logger.Debug("no update", "application", w.app.Key(), "reason", h.Message)
		r.u.events.waiting(w.app, h.Message)
		r.results.waiting(w.app, h)
	}
	return nil
}
