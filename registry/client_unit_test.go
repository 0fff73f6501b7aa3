package registry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

func TestNativeKindFor(t *testing.T) {
	for _, tc := range []struct {
		host string
		kind credref.Kind
		ok   bool
	}{
		{"123456789012.dkr.ecr.eu-west-1.amazonaws.com", credref.KindECR, true},
		{"123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com", credref.KindECR, true},
		{"123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn", credref.KindECR, true},
		{"12345.dkr.ecr.eu-west-1.amazonaws.com", 0, false},
		{"public.ecr.aws", 0, false},
		{"gcr.io", credref.KindGCP, true},
		{"eu.gcr.io", credref.KindGCP, true},
		{"europe-west1-docker.pkg.dev", credref.KindGCP, true},
		{"docker.pkg.dev", 0, false},
		{"example.azurecr.io", credref.KindAzure, true},
		{"example.azurecr.cn", credref.KindAzure, true},
		{"example.azurecr.us:443", credref.KindAzure, true},
		{"azurecr.io", 0, false},
		{"ghcr.io", 0, false},
		{"docker.io", 0, false},
	} {
		kind, ok := nativeKindFor(tc.host)
		if kind != tc.kind || ok != tc.ok {
			t.Errorf("nativeKindFor(%q) = %v, %v; want %v, %v", tc.host, kind, ok, tc.kind, tc.ok)
		}
	}
}

// nativeFunc adapts a function to credentials.Source.
type nativeFunc func(ctx context.Context, ref credref.Ref, t credentials.Target) (credentials.Credential, time.Time, error)

func (f nativeFunc) Credential(ctx context.Context, ref credref.Ref, t credentials.Target) (credentials.Credential, time.Time, error) {
	return f(ctx, ref, t)
}

func TestSourceFor(t *testing.T) {
	unused := nativeFunc(func(context.Context, credref.Ref, credentials.Target) (credentials.Credential, time.Time, error) {
		return credentials.Credential{}, time.Time{}, errors.New("not called")
	})
	withNative := credentials.NewResolver(credentials.WithNative(credref.KindGCP, unused))
	c := NewClient(WithCredentialResolver(withNative))
	gcr := imageRef(t, "gcr.io/project/app")

	src, err := c.sourceFor(c.Endpoint(gcr), gcr.Registry(), credref.Ref{})
	if err != nil || src.ref.Kind != credref.KindGCP || !src.native || !src.cached {
		t.Errorf("gcr.io with a GCP provider: %+v, %v", src, err)
	}
	src, _ = c.sourceFor(c.Endpoint(gcr), gcr.Registry(), envRef("X"))
	if src.ref.Kind != credref.KindEnv || !src.cached || src.ttl != imageCredentialTTL {
		t.Errorf("an image-level reference wins and is kept for a minute: %+v", src)
	}
	src, _ = c.sourceFor(c.Endpoint(gcr), gcr.Registry(), credref.Ref{Kind: credref.KindExt, Path: "/bin/creds"})
	if src.ref.Kind != credref.KindExt || src.cached {
		t.Errorf("an image-level script runs on every use: %+v", src)
	}
	ecr := imageRef(t, "123456789012.dkr.ecr.eu-west-1.amazonaws.com/app")
	if src, _ := c.sourceFor(c.Endpoint(ecr), ecr.Registry(), credref.Ref{}); !src.ref.IsZero() {
		t.Errorf("ECR without an ECR provider should be anonymous: %+v", src)
	}
}

func TestNativeWithoutCredentialsMeansAnonymous(t *testing.T) {
	var fail error
	provider := nativeFunc(func(context.Context, credref.Ref, credentials.Target) (credentials.Credential, time.Time, error) {
		if fail != nil {
			return credentials.Credential{}, time.Time{}, fail
		}
		return credentials.Credential{Username: "oauth2accesstoken", Password: "tok"}, time.Time{}, nil
	})
	c := NewClient(WithCredentialResolver(credentials.NewResolver(credentials.WithNative(credref.KindGCP, provider))))
	src := credSource{ref: credref.Ref{Kind: credref.KindGCP}, cached: true, native: true}
	gcr := credentials.Target{Host: "gcr.io", Repository: "project/app"}

	fail = fmt.Errorf("gcp: %w", credentials.ErrNoNative)
	if cred, err := c.resolve(t.Context(), src, gcr); err != nil || !cred.IsZero() {
		t.Errorf("no default credentials: %v, %v; want anonymous", cred, err)
	}
	fail = errors.New("metadata server unreachable")
	if _, err := c.resolve(t.Context(), src, gcr); err == nil {
		t.Error("other provider errors must not turn into anonymous access")
	}
	fail = nil
	if cred, err := c.resolve(t.Context(), src, gcr); err != nil || cred.Password != "tok" {
		t.Errorf("with credentials: %v, %v", cred, err)
	}
}
