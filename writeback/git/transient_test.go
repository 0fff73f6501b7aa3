package git

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/image-updater/argocd-image-updater/test/testenv"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/gitwire"
)

// testTransientFailures: a reset listing, a 503 fetch and a 500 push are
// each retried within the Write, and the batch lands; with no retries
// left, the batch fails with one error that every Application shares.
func (e *gitEnv) testTransientFailures(t *testing.T) {
	ns := e.argoNamespace(t, "transient", false)
	e.repo(t, "transient", nil)
	proxy := testenv.StartFaultProxy(t, e.git.HTTPURL)
	e.secret(t, ns, "proxy-creds", argoCDSecretTypeRepoCreds, map[string]string{
		"url": proxy.URL + "/", "username": e.git.Username, "password": e.git.Password,
	})
	url := proxy.URL + "/transient.git"
	is := func(method, suffix string) func(*http.Request) bool {
		return func(r *http.Request) bool {
			return r.Method == method && strings.HasPrefix(r.URL.Path, "/transient.git") && strings.HasSuffix(r.URL.Path, suffix)
		}
	}
	proxy.Inject(is(http.MethodGet, "/info/refs"), testenv.FaultReset)
	proxy.Inject(is(http.MethodPost, "/git-upload-pack"), testenv.Fault503)
	proxy.Inject(is(http.MethodPost, "/git-receive-pack"), testenv.Fault500)

	w := e.writer(t, ns, withTransientBackoff(time.Millisecond))
	a, b := appUpdate("main", url), appUpdate("main-web", url)
	b.Target = mustTarget("kustomization")
	results := mustWrite(t, w, a, b)
	for _, f := range []testenv.Fault{testenv.FaultReset, testenv.Fault503, testenv.Fault500} {
		if proxy.Injected(f) != 1 {
			t.Errorf("fault %s injected %d times, want 1", f, proxy.Injected(f))
		}
	}
	log := e.git.Log(t, "transient", "main")
	if got := subjects(log); !slices.Equal(got[:2], []string{"build: automatic update of main-web", "build: automatic update of main"}) {
		t.Errorf("history %v", got)
	}
	if results[0].Commit == "" || results[1].Commit == "" {
		t.Errorf("results %+v", results)
	}

	// No retries left: one error for the batch.
	w = e.writer(t, ns, WithTransientRetries(0))
	proxy.Inject(is(http.MethodGet, "/info/refs"), testenv.Fault502)
	a.Images[0].New.Tag, b.Images[0].New.Tag = "v0.0.3", "v0.0.3"
	results = w.write(context.Background(), []update{a, b})
	var be0, be1 *writeback.BatchError
	if !errors.As(results[0].Err, &be0) || !errors.As(results[1].Err, &be1) || be0 != be1 || be0.Applications != 2 {
		t.Errorf("errors %v and %v, want one BatchError of 2 Applications", results[0].Err, results[1].Err)
	}
}

func TestTransientGitError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("read tcp: connection reset by peer"), true},
		{fmt.Errorf("fetch: %w", plumbing.NewUnexpectedError(&githttp.Err{Response: &http.Response{StatusCode: 503, Request: &http.Request{URL: &url.URL{}}}})), true},
		{fmt.Errorf("fetch: %w", plumbing.NewUnexpectedError(&githttp.Err{Response: &http.Response{StatusCode: 501, Request: &http.Request{URL: &url.URL{}}}})), false},
		{context.DeadlineExceeded, false},
		{gitwire.ErrBranchMoved, false},
		{errors.New("command error on refs/heads/main: pre-receive hook declined"), false},
	} {
		if got := transientGitError(tc.err); got != tc.want {
			t.Errorf("transientGitError(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}
