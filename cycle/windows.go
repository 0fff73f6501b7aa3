package cycle

import (
	"context"
	"fmt"
	"time"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/window"
)

// SyncWindows gives the sync windows of an Application's AppProject that
// match it, as Argo CD matches them.
type SyncWindows interface {
	SyncWindows(ctx context.Context, app *application.Application) (window.Set, error)
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

// windowOf is app's window state for this pass, asked once.
func (r *run) windowOf(ctx context.Context, app *application.Application) windowState {
	if st, ok := r.windows[app.Key()]; ok {
		return st
	}
	st := r.u.windowState(ctx, app)
	if r.windows == nil {
		r.windows = map[string]windowState{}
	}
	r.windows[app.Key()] = st
	return st
}

func (u *Updater) windowState(ctx context.Context, app *application.Application) windowState {
	s := app.Settings
	if s.WindowsInvalid {
		return windowState{reason: "its update windows are not understood"}
	}
	set := s.Windows
	if s.UseSyncWindows {
		if u.syncWindows == nil {
			return windowState{reason: "it asks for its AppProject's sync windows, which this controller does not read"}
		}
		project, err := u.syncWindows.SyncWindows(ctx, app)
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

// heldByWindow tells whether the change of o waits for its Application's
// window, and says so once; the pass then ends with a check when the
// first window opens.
func (r *run) heldByWindow(ctx context.Context, o outcome) bool {
	st := r.windowOf(ctx, o.job.app)
	if st.open {
		return false
	}
	r.sum.WaitingWindow++
	if !st.opens.IsZero() && (r.sum.NextWindow.IsZero() || st.opens.Before(r.sum.NextWindow)) {
		r.sum.NextWindow = st.opens
	}
	msg := fmt.Sprintf("image %s: version %s waits: the Application is %s", o.job.spec.Key(), o.job.newVersion(o.result), st.reason)
	r.u.logger.Debug("no update", "application", o.job.app.Key(), "image", o.job.spec.Key(), "reason", msg)
	r.u.events.waiting(o.job.app, msg)
	return true
}
