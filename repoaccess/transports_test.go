package repoaccess

import (
	"context"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestKeptTransports: a transport is given again for the same settings
// only; a Resolver without KeepTransports builds its own each time.
func TestKeptTransports(t *testing.T) {
	ctx := context.Background()
	kept := NewTransports(0)
	resolver := func(opts ...ResolverOption) *Resolver { return NewResolver(emptyLister{}, "argocd", "", opts...) }
	get := func(r *Resolver, host string, c Credentials) *http.Transport {
		t.Helper()
		tr, err := r.HTTPTransport(ctx, host, c)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	base := Credentials{Username: "a", Password: "one"}
	first := get(resolver(KeepTransports(kept)), "charts.example.com", base)
	for _, tt := range []struct {
		name string
		host string
		c    Credentials
		same bool
	}{
		{"another cycle, the same settings", "charts.example.com", base, true},
		{"another password: sent per request", "charts.example.com", Credentials{Username: "b", Password: "two"}, true},
		{"another host", "other.example.com", base, false},
		{"insecure", "charts.example.com", Credentials{Insecure: true}, false},
		{"a proxy", "charts.example.com", Credentials{Proxy: "http://proxy.example.com:3128"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := get(resolver(KeepTransports(kept)), tt.host, tt.c); (got == first) != tt.same {
				t.Errorf("the same transport: %v, want %v", got == first, tt.same)
			}
		})
	}
	if get(resolver(), "charts.example.com", base) == get(resolver(), "charts.example.com", base) {
		t.Error("a Resolver without KeepTransports shared a transport")
	}
}

// emptyLister is a namespace without Secrets or ConfigMaps.
type emptyLister struct{}

func (emptyLister) RepositorySecrets(context.Context, string) ([]corev1.Secret, error) {
	return nil, nil
}

func (emptyLister) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (emptyLister) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}
