package testenv

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy records every request once, when its answer is complete (a
// watch also when it starts), without bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// configureAudit points the API server at an audit policy and a log file,
// and returns the log's path.
func configureAudit(t testing.TB, env *envtest.Environment) string {
	t.Helper()
	dir := t.TempDir()
	policy, log := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	writeFile(t, policy, auditPolicy)
	env.ControlPlane.APIServer = &envtest.APIServer{}
	args := env.ControlPlane.APIServer.Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", log)
	// Each event is written before the request is answered, so a test
	// reads everything that was answered.
	args.Set("audit-log-mode", "blocking")
	args.Set("audit-log-format", "json")
	return log
}

// AuditRecord is one request in the API server's audit log.
type AuditRecord struct {
	// User is the authenticated user name, for a ServiceAccount
	// "system:serviceaccount:<namespace>:<name>".
	User string
	// Verb is the RBAC verb: get, list, watch, create, update, patch,
	// delete, deletecollection.
	Verb string
	// APIGroup, Resource, Subresource, Namespace and Name say what the
	// request was about; all are empty for a non-resource URL such as
	// /version, whose path is in URI.
	APIGroup, Resource, Subresource, Namespace, Name string
	URI                                              string
	// Code is the HTTP status of the answer (0 for a watch still open).
	Code int
	// Stage is ResponseStarted (a watch that began) or ResponseComplete.
	Stage string
	// Received and Done are when the API server received the request and
	// when it reached Stage.
	Received, Done time.Time
}

// AuditLog reads the records of the audit log of an API server started
// WithAuditLog.
func (k *Kube) AuditLog(t testing.TB) []AuditRecord {
	t.Helper()
	if k.auditLog == "" {
		t.Fatal("AuditLog: the API server was started without WithAuditLog")
	}
	f, err := os.Open(k.auditLog)
	if err != nil {
		t.Fatalf("read the audit log: %v", err)
	}
	defer f.Close()
	var records []AuditRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e struct {
			Stage      string `json:"stage"`
			RequestURI string `json:"requestURI"`
			Verb       string `json:"verb"`
			User       struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
				APIGroup    string `json:"apiGroup"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
			StageTimestamp           time.Time `json:"stageTimestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// The line being written as we read: the records before it
			// are complete.
			break
		}
		r := AuditRecord{User: e.User.Username, Verb: e.Verb, URI: e.RequestURI, Stage: e.Stage,
			Received: e.RequestReceivedTimestamp, Done: e.StageTimestamp}
		if o := e.ObjectRef; o != nil {
			r.APIGroup, r.Resource, r.Subresource, r.Namespace, r.Name = o.APIGroup, o.Resource, o.Subresource, o.Namespace, o.Name
		}
		if e.ResponseStatus != nil {
			r.Code = e.ResponseStatus.Code
		}
		records = append(records, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the audit log: %v", err)
	}
	return records
}
