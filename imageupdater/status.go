package imageupdater

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/cycle"
)

// Condition types and reasons, as the resource-based Argo CD Image
// Updater reports them; their messages read as v1.3.0's, which users and
// its tests match on.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionError       = "Error"

	ReasonSucceeded        = "ReconcileSucceeded"
	ReasonCompletedErrors  = "ReconcileCompletedWithErrors"
	ReasonFailed           = "ReconcileFailed"
	ReasonIdle             = "Idle"
	ReasonNoErrors         = "NoErrors"
	ReasonPartialErrors    = "PartialErrors"
	ReasonReconcileError   = "ReconcileError"
	maxErrorsInMessage     = 3
	defaultCheckedInterval = 5 * time.Minute
)

// Status writes what each update cycle did into the status of the
// ImageUpdaters of a Source: a merge patch of the status subresource, and
// only when the status changed. lastCheckedAt alone changing is written
// at most once per interval (WithCheckedInterval), so that a cycle that
// finds nothing new costs no write.
type Status struct {
	client  dynamic.Interface
	source  *Source
	logger  *slog.Logger
	checked time.Duration
}

// StatusOption configures Status.
type StatusOption func(*Status)

// WithCheckedInterval is how stale lastCheckedAt may grow before a cycle
// that changed nothing else writes it; 5 minutes by default.
func WithCheckedInterval(d time.Duration) StatusOption {
	return func(s *Status) { s.checked = d }
}

// WithStatusLogger sets the logger.
func WithStatusLogger(l *slog.Logger) StatusOption { return func(s *Status) { s.logger = l } }

// NewStatus reports the cycles of source's resources through client.
func NewStatus(client dynamic.Interface, source *Source, opts ...StatusOption) *Status {
	s := &Status{client: client, source: source, logger: slog.New(slog.DiscardHandler), checked: defaultCheckedInterval}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

var _ cycle.Observer = (*Status)(nil)

// CycleDone writes the status of every resource the cycle read, or of
// those named in only.
func (s *Status) CycleDone(ctx context.Context, start time.Time, results []cycle.AppResult, only []types.NamespacedName) {
	byResource := map[types.NamespacedName][]cycle.AppResult{}
	for _, r := range results {
		if r.App.ImageUpdater.Name != "" {
			byResource[r.App.ImageUpdater] = append(byResource[r.App.ImageUpdater], r)
		}
	}
	now := metav1.NewTime(start.Truncate(time.Second))
	for _, r := range s.source.resources() {
		name := types.NamespacedName{Namespace: r.obj.Namespace, Name: r.obj.Name}
		if only != nil && !slices.Contains(only, name) {
			continue
		}
		next := nextStatus(r.obj, r.err, byResource[name], only != nil, now, s.checked)
		if next == nil {
			continue
		}
		if err := s.patch(ctx, name, next); err != nil && !apierrors.IsNotFound(err) {
			s.logger.Error("cannot write the status of an ImageUpdater", "imageUpdater", name, "error", err)
		}
	}
}

func (s *Status) patch(ctx context.Context, name types.NamespacedName, st *api.ImageUpdaterStatus) error {
	body, err := statusPatch(st)
	if err != nil {
		return err
	}
	_, err = s.client.Resource(api.Resource()).Namespace(name.Namespace).
		Patch(ctx, name.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// statusPatch is the merge patch of st, without the health gate's lists:
// the gate writes those (healthgate), and the copy a cycle read may be
// older than its last write.
func statusPatch(st *api.ImageUpdaterStatus) ([]byte, error) {
	own := *st
	own.HealthGate, own.SkippedVersions = nil, nil
	if len(own.WaitingVersions) > 0 {
		return json.Marshal(map[string]any{"status": own})
	}
	// None waits now: a merge patch clears the list only with a null.
	b, err := json.Marshal(own)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	fields["waitingVersions"] = nil
	return json.Marshal(map[string]any{"status": fields})
}

// nextStatus is the status iu gets from a cycle's results, or nil when
// nothing worth a write changed. invalid is why the resource could not be
// used at all. A targeted check (partial) checked only some of the
// resource's Applications: the others' waiting versions stay.
func nextStatus(iu *api.ImageUpdater, invalid error, results []cycle.AppResult, partial bool, now metav1.Time, checked time.Duration) *api.ImageUpdaterStatus {
	old := iu.Status
	st := *old.DeepCopy()
	st.ObservedGeneration = iu.Generation
	st.ApplicationsMatched = int32(len(results))
	st.ImagesManaged = 0
	var errs []string
	updated := 0
	for _, r := range results {
		st.ImagesManaged += int32(len(r.App.Settings.Images))
		for _, e := range r.Errors {
			errs = append(errs, r.App.Key()+": "+e.Error())
		}
		updated += len(r.Updated)
	}
	if updated > 0 {
		st.LastUpdatedAt = &now
		st.RecentUpdates = recentUpdates(results, now)
	}
	st.WaitingVersions = waitingVersions(old.WaitingVersions, results, partial)
	setConditions(&st, iu.Generation, invalid, errs, updated)

	if equality.Semantic.DeepEqual(st, old) && old.LastCheckedAt != nil && now.Sub(old.LastCheckedAt.Time) < checked {
		return nil
	}
	st.LastCheckedAt = &now
	return &st
}

// recentUpdates are the cycle's updates, one per alias and version with
// the number of Applications given it.
func recentUpdates(results []cycle.AppResult, now metav1.Time) []api.RecentUpdate {
	var out []api.RecentUpdate
	index := map[string]int{}
	for _, r := range results {
		for _, c := range r.Updated {
			alias := c.Alias
			if alias == "" {
				alias = c.Image.OriginalName()
			}
			key := alias + "\x00" + c.New.String()
			if i, ok := index[key]; ok {
				out[i].ApplicationsUpdated++
				continue
			}
			index[key] = len(out)
			out = append(out, api.RecentUpdate{
				Alias:               alias,
				Image:               c.Image.OriginalName(),
				NewVersion:          c.New.String(),
				ApplicationsUpdated: 1,
				UpdatedAt:           now,
				Message:             fmt.Sprintf("Updated from %s to %s.", c.Old, c.New),
			})
		}
	}
	return out
}

// maxWaiting bounds the status's waiting versions, as its CRD does.
const maxWaiting = 1000

// waitingVersions are the results' waiting versions, in their order; with
// partial, after old's of the Applications the results do not hold.
func waitingVersions(old []api.WaitingVersion, results []cycle.AppResult, partial bool) []api.WaitingVersion {
	var out []api.WaitingVersion
	if partial {
		checked := map[string]bool{}
		for _, r := range results {
			checked[r.App.Name] = true
		}
		for _, w := range old {
			if !checked[w.Application] {
				out = append(out, w)
			}
		}
	}
	for _, r := range results {
		for _, w := range r.Waiting {
			v := api.WaitingVersion{Application: r.App.Name, Alias: w.Key, Chart: w.Chart, Version: w.Version, Reason: w.Reason, Message: w.Message}
			if !w.Until.IsZero() {
				until := metav1.NewTime(w.Until.UTC().Truncate(time.Second))
				v.Until = &until
			}
			out = append(out, v)
		}
	}
	if len(out) > maxWaiting {
		out = out[:maxWaiting]
	}
	return out
}

func setConditions(st *api.ImageUpdaterStatus, gen int64, invalid error, errs []string, updated int) {
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	set(ConditionReconciling, metav1.ConditionFalse, ReasonIdle, "Last check completed. Awaiting next cycle.")
	switch {
	case invalid != nil:
		set(ConditionError, metav1.ConditionTrue, ReasonReconcileError, invalid.Error())
		set(ConditionReady, metav1.ConditionFalse, ReasonFailed, "Reconciliation failed: "+invalid.Error())
	case len(errs) > 0:
		set(ConditionError, metav1.ConditionTrue, ReasonPartialErrors, errorsMessage(errs))
		set(ConditionReady, metav1.ConditionTrue, ReasonCompletedErrors,
			fmt.Sprintf("Reconciled %d applications with %d errors, %d images updated.", st.ApplicationsMatched, len(errs), updated))
	default:
		set(ConditionError, metav1.ConditionFalse, ReasonNoErrors, "No errors during last reconciliation.")
		set(ConditionReady, metav1.ConditionTrue, ReasonSucceeded,
			fmt.Sprintf("Reconciled %d applications, %d images updated.", st.ApplicationsMatched, updated))
	}
}

// errorsMessage names the first errors, so that the status tells what to
// fix without the events.
func errorsMessage(errs []string) string {
	msg := fmt.Sprintf("%d error(s) occurred during image update checks: %s", len(errs), strings.Join(errs[:min(len(errs), maxErrorsInMessage)], "; "))
	if len(errs) > maxErrorsInMessage {
		msg += "; ..."
	}
	return msg
}
