package cycle

import (
	"cmp"
	"context"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/notice"
	"github.com/image-updater/argocd-image-updater/writeback"
)

// Notices sets the annotations Argo CD Notifications reads (package
// notice) on Applications.
type Notices interface {
	// Annotate sets annotations of the Application in one request that
	// leaves its others as they are.
	Annotate(ctx context.Context, namespace, name string, annotations map[string]string) error
}

// WithNotices keeps the last update, failure, revert and wait of each
// Application in its annotations (see package notice), set through n: a
// write's in the request that writes it, the others' in a request each,
// once per message. By default none is kept.
func WithNotices(n Notices) Option { return func(u *Updater) { u.notices = n } }

// noticeTimeout bounds the requests that set the notices of a pass,
// sent after its writes.
const noticeTimeout = 30 * time.Second

// maxNoticesPerPass bounds the requests a pass sends for failures and
// waits: an outage of a registry many Applications use fails them all at
// once, and their notices must not crowd the API server's requests out.
// The rest are set by the next passes, as they still differ from what
// the Applications hold.
const maxNoticesPerPass = 500

// records is the Record of au's write: the health gate's record of it and
// the notice of its update or revert, set in the request that writes it.
func (u *Updater) records(au *appUpdate) func(writeback.Result) map[string]string {
	gate := u.gateRecord(au)
	if gate == nil && u.notices == nil {
		return nil
	}
	return func(res writeback.Result) map[string]string {
		out := map[string]string{}
		if gate != nil {
			if key, value := gate(res); key != "" && value != "" {
				out[key] = value
			}
		}
		if key, value := u.writeNotice(au, res); value != "" {
			out[key] = value
		}
		return out
	}
}

// writeNotice is the annotation and value of the notice of what res
// wrote for au; "" when notices are not kept or nothing was written.
func (u *Updater) writeNotice(au *appUpdate, res writeback.Result) (key, value string) {
	if u.notices == nil || len(res.Changed)+len(res.ChangedCharts) == 0 {
		return "", ""
	}
	kind, message := notice.Updated, ""
	if au.revert {
		kind, message = notice.Reverted, "the health gate wrote back the version before one that broke the Application"
	}
	n := notice.Notice{At: u.now(), Message: message}
	for _, c := range res.Changed {
		n.Images = append(n.Images, notice.Version{Alias: c.Alias, Image: c.Image.OriginalName(), From: c.Old.String(), To: c.New.String()})
	}
	for _, c := range res.ChangedCharts {
		n.Charts = append(n.Charts, notice.Version{Alias: c.Alias, Chart: c.Chart, From: c.Old, To: c.New})
	}
	return kind.Annotation(), n.Encode()
}

// noticeUnless sets the notice of a write whose request did not carry it
// (a pull request, a parent's manifests, a cached copy without
// annotations): after the write, in a request of its own.
func (u *Updater) noticeUnless(ctx context.Context, au *appUpdate, res writeback.Result) {
	key, value := u.writeNotice(au, res)
	if value == "" || !res.Written || res.Recorded[key] != "" {
		return
	}
	u.annotate(ctx, au.app, map[string]string{key: value})
}

func (u *Updater) annotate(ctx context.Context, app *application.Application, annotations map[string]string) {
	err := u.guard("setting the notices of Application "+app.Key(), func() error {
		ctx, cancel := context.WithTimeout(u.writeContext(ctx), noticeTimeout)
		defer cancel()
		return u.notices.Annotate(ctx, app.Namespace, app.Name, annotations)
	})
	if err != nil {
		u.logger.Warn("a notice for Argo CD Notifications was not set", "application", app.Key(), "error", err)
	}
}

// sendNotices sets the failure and wait notices of a pass's results, each
// only when it says something other than the one the Application holds:
// a failure or a wait that lasts is told once.
func (u *Updater) sendNotices(ctx context.Context, results []AppResult) {
	if u.notices == nil || u.dryRun || len(results) == 0 || u.mayWrite(ctx) != nil {
		return
	}
	now := u.now()
	limit := cmp.Or(u.maxNotices, maxNoticesPerPass)
	sent, deferred := 0, 0
	var g errgroup.Group
	g.SetLimit(u.maxConcurrency)
	for _, ar := range results {
		set := map[string]string{}
		if len(ar.Errors) > 0 {
			msgs := make([]string, len(ar.Errors))
			for i, err := range ar.Errors {
				msgs[i] = err.Error()
			}
			sort.Strings(msgs)
			fresh(ar.App, notice.Failed, notice.Notice{At: now, Message: strings.Join(msgs, "; ")}, set)
		}
		if len(ar.Waiting) > 0 {
			n := notice.Notice{At: now}
			msgs := make([]string, 0, len(ar.Waiting))
			for _, w := range ar.Waiting {
				n.Images, n.Charts = waitingVersion(ar.App, w, n.Images, n.Charts)
				msgs = append(msgs, w.Message)
			}
			sort.Strings(msgs)
			n.Message = strings.Join(msgs, "; ")
			fresh(ar.App, notice.Waiting, n, set)
		}
		if len(set) == 0 {
			continue
		}
		if sent == limit {
			deferred++
			continue
		}
		sent++
		g.Go(func() error {
			u.annotate(ctx, ar.App, set)
			return nil
		})
	}
	_ = g.Wait()
	if deferred > 0 {
		u.logger.Info("notices for Argo CD Notifications left to the next cycles", "sent", sent, "deferred", deferred)
	}
}

// fresh adds n to set unless app holds it already.
func fresh(app *application.Application, kind notice.Kind, n notice.Notice, set map[string]string) {
	if !notice.Same(app.Annotation(kind.Annotation()), n) {
		set[kind.Annotation()] = n.Encode()
	}
}

// waitingVersion adds w, named as its Application's settings name it, to
// images or charts.
func waitingVersion(app *application.Application, w WaitingVersion, images, charts []notice.Version) ([]notice.Version, []notice.Version) {
	if w.Chart {
		v := notice.Version{Chart: w.Key, To: w.Version}
		for _, c := range app.Settings.Charts {
			if c.Key() == w.Key {
				v.Alias, v.Chart = c.Alias, c.Chart
			}
		}
		return images, append(charts, v)
	}
	v := notice.Version{Image: w.Key, To: w.Version}
	for _, img := range app.Settings.Images {
		if img.Key() == w.Key {
			v.Alias, v.Image = img.Alias, img.Image.OriginalName()
		}
	}
	return append(images, v), charts
}
