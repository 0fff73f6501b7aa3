package registry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// A token limited by an Azure Container Registry scope map without
// metadata/read may pull but not list tags: the registry answers the tag
// listing with 401. A server standing in for the registry answers that
// way; the registries.conf entry gives it the registry's host name.
func TestAzureScopeMapHint(t *testing.T) {
	const hint = "Azure Container Registry: a token limited by a scope map needs metadata/read"
	tests := []struct {
		name     string
		prefix   string
		status   int
		creds    bool
		wantHint bool
	}{
		{name: "401 with credentials", prefix: "example.azurecr.io", status: http.StatusUnauthorized, creds: true, wantHint: true},
		{name: "403 with credentials", prefix: "example.azurecr.io", status: http.StatusForbidden, creds: true, wantHint: true},
		{name: "Azure China", prefix: "example.azurecr.cn", status: http.StatusUnauthorized, creds: true, wantHint: true},
		{name: "upper case host", prefix: "Example.AzureCR.io", status: http.StatusUnauthorized, creds: true, wantHint: true},
		{name: "anonymous", prefix: "example.azurecr.io", status: http.StatusUnauthorized},
		{name: "not found", prefix: "example.azurecr.io", status: http.StatusNotFound, creds: true},
		{name: "another registry", prefix: "registry.example.com", status: http.StatusUnauthorized, creds: true},
		{name: "a host only named like it", prefix: "azurecr.io.example.com", status: http.StatusUnauthorized, creds: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path == "/v2/" {
					if _, _, ok := r.BasicAuth(); !ok {
						w.Header().Set("WWW-Authenticate", `Basic realm="Azure Container Registry"`)
						w.WriteHeader(http.StatusUnauthorized)
					}
					return
				}
				code := map[int]string{401: "UNAUTHORIZED", 403: "DENIED", 404: "NAME_UNKNOWN"}[tt.status]
				w.WriteHeader(tt.status)
				fmt.Fprintf(w, `{"errors":[{"code":%q,"message":"authentication required"}]}`, code)
			}))
			t.Cleanup(srv.Close)
			fields := []string{}
			if tt.creds {
				fields = append(fields, "credentials: env:CREDS")
			}
			c := NewClient(
				WithConfig(testConfigPrefix(t, tt.prefix, strings.TrimPrefix(srv.URL, "http://"), fields...)),
				WithCredentialResolver(envResolver(map[string]string{"CREDS": "scoped-token:secret-password"})),
				withRetry(1, 0, 0),
			)
			_, err := c.Tags(t.Context(), imageRef(t, strings.ToLower(tt.prefix)+"/team/app"), credref.Ref{})
			if err == nil {
				t.Fatal("want an error")
			}
			if got := strings.Contains(err.Error(), hint); got != tt.wantHint {
				t.Errorf("hint %v, want %v: %v", got, tt.wantHint, err)
			}
			if strings.Contains(err.Error(), "secret-password") {
				t.Errorf("the password is in the error: %v", err)
			}
		})
	}
}

// With the pod's workload identity (azure), a refusal at an Azure
// Container Registry host points at the identity's role, not at scope
// maps, whether the listing or another read was refused.
func TestAzureWorkloadIdentityHint(t *testing.T) {
	const (
		hint     = "Azure Container Registry: the pod's workload identity needs a role that may read the repository, such as AcrPull"
		scopeMap = "scope map"
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if _, _, ok := r.BasicAuth(); !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="Azure Container Registry"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/v2/" {
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
	}))
	t.Cleanup(srv.Close)
	identity := nativeFunc(func(context.Context, credref.Ref, credentials.Target) (credentials.Credential, time.Time, error) {
		return credentials.Credential{Username: "00000000-0000-0000-0000-000000000000", Password: "refresh-token-secret"}, time.Time{}, nil
	})
	c := NewClient(
		WithConfig(testConfigPrefix(t, "example.azurecr.io", strings.TrimPrefix(srv.URL, "http://"))),
		WithCredentialResolver(credentials.NewResolver(credentials.WithNative(credref.KindAzure, identity))),
		withRetry(1, 0, 0),
	)
	ref := imageRef(t, "example.azurecr.io/team/app:1.0.0")
	_, tagsErr := c.Tags(t.Context(), ref, credref.Ref{})
	_, metaErr := c.Manifest(t.Context(), ref, credref.Ref{})
	for _, err := range []error{tagsErr, metaErr} {
		if err == nil {
			t.Fatal("want an error")
		}
		if !strings.Contains(err.Error(), hint) || strings.Contains(err.Error(), scopeMap) {
			t.Errorf("want the workload identity hint alone: %v", err)
		}
		if strings.Contains(err.Error(), "refresh-token-secret") {
			t.Errorf("the password is in the error: %v", err)
		}
	}
}
