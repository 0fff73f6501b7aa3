package application

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Status is what Argo CD last said of an Application's sync and health:
// what the health gate judges a written version by.
type Status struct {
	// Health is status.health.status: Healthy, Progressing, Degraded,
	// Suspended, Missing or Unknown; "" before Argo CD assessed it.
	Health string
	// Degraded names the resources Argo CD reports Degraded, with their
	// messages ("Deployment shop/front: ..."), when it keeps resource
	// health in the Application (Argo CD 2, or 3 with
	// controller.resource.health.persist); at most maxStatusMessages.
	Degraded []string
	// Sync is status.sync.status: Synced, OutOfSync or Unknown.
	Sync string
	// Operation is status.operationState, the last sync.
	Operation Operation
	// ReconciledAt is status.reconciledAt: when Argo CD last compared the
	// Application with its source (a refresh, a change of its spec, its
	// periodic reconciliation); zero when it never did. It does not move
	// while the application-controller is down.
	ReconciledAt time.Time
	// CannotCompare is the type of a condition of status.conditions that
	// says Argo CD could not compare the Application with its cluster
	// (ComparisonError, UnknownError: the cluster is unreachable, its
	// cache not synced): its health then is not the live one. "" when
	// there is none.
	CannotCompare string
}

// cannotCompare are the condition types Argo CD sets when it could not
// read what runs in the Application's cluster.
var cannotCompare = []string{"ComparisonError", "UnknownError"}

// Operation is the last sync operation of an Application.
type Operation struct {
	// Phase is Running, Terminating, Succeeded, Failed or Error; "" when
	// no operation ran.
	Phase   string
	Message string
	// StartedAt is when the operation started, FinishedAt when it ended
	// (zero while it runs).
	StartedAt, FinishedAt time.Time
	// Revision is the revision it synced (the first source's, for
	// several).
	Revision string
	// Retries counts the failed attempts Argo CD retries (its sync
	// policy's retry): the phase is Running again meanwhile.
	Retries int64
	// Automated tells that Argo CD's automated sync started the
	// operation (initiatedBy.automated), not a person.
	Automated bool
	// Sources are the sources a person's sync named (operation.sync.source
	// or sources) where their overrides differ from the spec's: Argo CD's
	// rollback syncs an earlier history entry's source and leaves the spec
	// as it is. Each has the Index of the spec's source it stands for.
	// Kept only when they differ, as a plain sync names the spec's own.
	Sources []Source
}

// Failed reports whether the operation failed: it ended in failure, or an
// attempt failed and Argo CD retries it.
func (o Operation) Failed() bool {
	return o.Phase == "Failed" || o.Phase == "Error" || o.Phase == "Running" && o.Retries > 0
}

func (o Operation) zero() bool {
	return o.Phase == "" && o.Message == "" && o.StartedAt.IsZero() && o.FinishedAt.IsZero() && o.Revision == "" && o.Retries == 0 && !o.Automated && o.Sources == nil
}

// syncedSources are the sources of the last operation, when a person's
// sync named sources whose overrides differ from those of spec, the
// Application's sources; nil otherwise.
func syncedSources(obj map[string]any, spec []Source, multiSource bool, str func(string) string) []Source {
	op, ok := mapAt(obj, "status", "operationState", "operation")
	if !ok {
		return nil
	}
	if automated, _, _ := unstructured.NestedBool(op, "initiatedBy", "automated"); automated {
		return nil
	}
	var named []map[string]any
	if multiSource {
		list, _ := fieldAt(op, "sync", "sources").([]any)
		for _, e := range list {
			m, _ := e.(map[string]any)
			named = append(named, m)
		}
	} else if m, ok := mapAt(op, "sync", "source"); ok {
		named = append(named, m)
	}
	var out []Source
	for i, m := range named {
		if m == nil || i >= len(spec) {
			continue
		}
		own := spec[i]
		if own.Dry {
			// A Source Hydrator's sync source is the rendered one.
			continue
		}
		src := newSource(own.Index, m, "", str)
		// Read as the spec's source is, whatever blocks it names.
		src.Type = own.Type
		if !sameOverrides(src, own) {
			out = append(out, src)
		}
	}
	return out
}

// sameOverrides tells whether two sources set the same overrides.
func sameOverrides(a, b Source) bool {
	return slices.Equal(a.KustomizeImages, b.KustomizeImages) && reflect.DeepEqual(a.helmParameters, b.helmParameters) && reflect.DeepEqual(a.pluginEnv, b.pluginEnv)
}

// retrying is what Argo CD appends to the message of an attempt it retries.
var retrying = regexp.MustCompile(`\. Retrying attempt #[0-9]+ at [^.]*\.$`)

// Bounds of what a Snapshot keeps of Argo CD's messages: they describe
// resources a tenant's manifests define.
const (
	maxStatusMessages = 3
	maxStatusMessage  = 256
)

// readStatus reads what Status holds from an Application's status; nil
// when there is nothing to keep.
func readStatus(obj map[string]any, str func(string) string) *Status {
	st := &Status{
		Health: str(stringAt(obj, "status", "health", "status")),
		Sync:   str(stringAt(obj, "status", "sync", "status")),
	}
	st.ReconciledAt = timeAt(obj, "status", "reconciledAt")
	if list, ok := fieldAt(obj, "status", "conditions").([]any); ok {
		for _, c := range list {
			m, _ := c.(map[string]any)
			if typ := stringAt(m, "type"); slices.Contains(cannotCompare, typ) {
				st.CannotCompare = typ
				break
			}
		}
	}
	if op, ok := mapAt(obj, "status", "operationState"); ok {
		st.Operation = Operation{
			Phase:      str(stringAt(op, "phase")),
			StartedAt:  timeAt(op, "startedAt"),
			FinishedAt: timeAt(op, "finishedAt"),
			Revision:   str(stringAt(op, "syncResult", "revision")),
		}
		if n, ok := op["retryCount"].(int64); ok {
			st.Operation.Retries = n
		}
		st.Operation.Automated, _, _ = unstructured.NestedBool(op, "operation", "initiatedBy", "automated")
		if st.Operation.Revision == "" {
			if revs := stringsAt(op, str, "syncResult", "revisions"); len(revs) > 0 {
				st.Operation.Revision = revs[0]
			}
		}
		if st.Operation.Failed() {
			// What failed, without when Argo CD tries again.
			msg := retrying.ReplaceAllString(stringAt(op, "message"), "")
			st.Operation.Message = clip(msg, 2*maxStatusMessage)
		}
	}
	if st.Health == "Degraded" {
		if list, ok := fieldAt(obj, "status", "resources").([]any); ok {
			for _, r := range list {
				m, ok := r.(map[string]any)
				if !ok || stringAt(m, "health", "status") != "Degraded" {
					continue
				}
				if len(st.Degraded) == maxStatusMessages {
					st.Degraded = append(st.Degraded, "...")
					break
				}
				name := stringAt(m, "kind") + " " + stringAt(m, "name")
				if ns := stringAt(m, "namespace"); ns != "" {
					name = stringAt(m, "kind") + " " + ns + "/" + stringAt(m, "name")
				}
				if msg := stringAt(m, "health", "message"); msg != "" {
					name += ": " + msg
				}
				st.Degraded = append(st.Degraded, clip(name, maxStatusMessage))
			}
		}
	}
	if st.Health == "" && st.Sync == "" && st.Operation.zero() && st.Degraded == nil && st.ReconciledAt.IsZero() && st.CannotCompare == "" {
		return nil
	}
	return st
}

func fieldAt(m map[string]any, fields ...string) any {
	for i, f := range fields {
		v, ok := m[f]
		if !ok {
			return nil
		}
		if i == len(fields)-1 {
			return v
		}
		if m, ok = v.(map[string]any); !ok {
			return nil
		}
	}
	return nil
}

func timeAt(m map[string]any, fields ...string) time.Time {
	t, err := time.Parse(time.RFC3339, stringAt(m, fields...))
	if err != nil {
		return time.Time{}
	}
	return t
}

// clip cuts s to at most n bytes, at a character boundary, and to one
// line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Status is what Argo CD last said of the Application's sync and health.
func (s *Snapshot) Status() Status {
	if s.status == nil {
		return Status{}
	}
	return *s.status
}

// Status is what Argo CD said of the Application's sync and health when
// it was read.
func (a *Application) Status() Status {
	if a.snapshot == nil {
		return Status{}
	}
	return a.snapshot.Status()
}

// Annotation is the value of one of the updater's annotations of the
// Application ("" when unset), key including settings.AnnotationPrefix.
func (a *Application) Annotation(key string) string {
	if a.snapshot == nil {
		return ""
	}
	return a.snapshot.Annotation(key)
}
