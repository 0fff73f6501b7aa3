package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

func TestTransientKubeError(t *testing.T) {
	gr := schema.GroupResource{Group: "argoproj.io", Resource: "applications"}
	tests := []struct {
		err  error
		want bool
	}{
		{apierrors.NewInternalError(errors.New("boom")), true},
		{apierrors.NewServiceUnavailable("restarting"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewGenericServerResponse(http.StatusBadGateway, "get", gr, "", "bad gateway", 0, false), true},
		{fmt.Errorf("list: %w", io.ErrUnexpectedEOF), true},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{errors.New("stream error: stream ID 3; INTERNAL_ERROR; received from peer"), true},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), false},
		{apierrors.NewUnauthorized("who are you"), false},
		{apierrors.NewNotFound(gr, "x"), false},
		{errors.New("x509: certificate signed by unknown authority"), false},
	}
	for _, tt := range tests {
		if got := transientKubeError(tt.err); got != tt.want {
			t.Errorf("transientKubeError(%v) = %t, want %t", tt.err, got, tt.want)
		}
	}
}

// A start-up request that fails transiently (a plain 500, a reset, an
// answer cut short, a 502) is retried: the controller starts rather than
// exiting for the pod to be restarted.
func TestStartupRetriesTransientFailures(t *testing.T) {
	t.Parallel()
	k := testenv.StartKube(t, testenv.WithImageUpdaterCRD(api.AddToScheme))
	w := newControllerWorldOn(t, k)
	proxy, through := testenv.StartKubeFaultProxy(t, k.ServiceAccountConfig(t, testenv.ArgoCDNamespace, "argocd-image-updater"))
	w.kubeconfig = testenv.WriteKubeconfig(t, through, testenv.ArgoCDNamespace)
	w.createApp(t, "main")
	discovery := func(r *http.Request) bool {
		return r.URL.Path == "/apis/argocd-image-updater.argoproj.io/v1alpha1"
	}
	faults := []testenv.Fault{testenv.Fault500, testenv.FaultReset, testenv.FaultTruncate, testenv.Fault502}
	proxy.Inject(discovery, faults...)

	var stderr testenv.SyncBuffer
	if code := w.run(t.Context(), &stderr, "--once"); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, stderr.String())
	}
	for _, f := range faults {
		if proxy.Injected(f) != 1 {
			t.Errorf("fault %s injected %d times, want 1", f, proxy.Injected(f))
		}
	}
	if got := w.images(t, "main"); !slices.Equal(got, []string{w.reg.Repo("eks-app") + ":v0.1.0"}) {
		t.Errorf("images %v\n%s", got, stderr.String())
	}
	if n := strings.Count(stderr.String(), `waitingFor="whether the API server serves ImageUpdaters"`); n != len(faults) {
		t.Errorf("%d retries logged, want %d:\n%s", n, len(faults), stderr.String())
	}
}
