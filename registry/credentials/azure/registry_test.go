package azure

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// A Distribution registry that takes the tokens of an Azure Container
// Registry's token service, reached as example.azurecr.io, lists its tags
// to the registry client with the pod's workload identity: chosen by the
// host when nothing else is configured, named in registries.conf, or
// named by the image.
func TestAzureRegistryTags(t *testing.T) {
	a := startAzure(t)
	reg := testenv.StartRegistry(t, testenv.WithACRTokens(a, testRegistry))
	reg.PushTags(t, "team/app", []string{"1.0.0", "1.1.0", "2.0.0"})

	for _, tc := range []struct {
		name   string
		fields []string    // of the registries.conf entry
		image  credref.Ref // the image's own reference
	}{
		{name: "chosen by host"},
		{name: "registries.conf", fields: []string{"credentials: azure"}},
		{name: "image reference", image: azureRef},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(a.CallsTo(testenv.AzureExchange))
			c := registry.NewClient(
				registry.WithConfig(acrConfig(t, a, reg, tc.fields...)),
				registry.WithCredentialResolver(credentials.NewResolver(
					credentials.WithNative(credref.KindAzure, newProvider(withTransport(a.Transport()))))),
			)
			ref, err := imageref.Parse(testRegistry + "/team/app:1.0.0")
			if err != nil {
				t.Fatal(err)
			}
			tags, err := c.Tags(t.Context(), ref, tc.image)
			if err != nil {
				t.Fatalf("Tags: %v", err)
			}
			slices.Sort(tags)
			if want := []string{"1.0.0", "1.1.0", "2.0.0"}; !slices.Equal(tags, want) {
				t.Errorf("tags = %v, want %v", tags, want)
			}
			if n := len(a.CallsTo(testenv.AzureExchange)) - before; n != 1 {
				t.Errorf("%d exchanges, want 1", n)
			}
			var byRefresh int
			for _, call := range a.CallsTo(testenv.AzureToken) {
				if user, _, ok := basicAuth(call); ok && user == testenv.ACRUser {
					byRefresh++
				}
			}
			if byRefresh == 0 {
				t.Error("no registry token was asked for with the refresh token")
			}
		})
	}

	// Without a workload identity, a registry chosen by its host is read
	// anonymously, which this one refuses: the error is the registry's
	// 401 with the advice for both cases, and nothing was asked of Entra
	// ID.
	t.Run("no identity", func(t *testing.T) {
		t.Setenv("AZURE_FEDERATED_TOKEN_FILE", "")
		before, tokenCalls := len(a.CallsTo(testenv.AzureEntra)), len(a.CallsTo(testenv.AzureToken))
		c := registry.NewClient(
			registry.WithConfig(acrConfig(t, a, reg)),
			registry.WithCredentialResolver(credentials.NewResolver(
				credentials.WithNative(credref.KindAzure, newProvider(withTransport(a.Transport()))))),
		)
		ref, err := imageref.Parse(testRegistry + "/team/app:1.0.0")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Tags(t.Context(), ref, credref.Ref{})
		var re *registry.Error
		if err == nil || !errors.As(err, &re) || re.StatusCode() != 401 ||
			!strings.Contains(err.Error(), "a pod without one (no AZURE_FEDERATED_TOKEN_FILE) reads the registry anonymously") {
			t.Fatalf("error = %v, want the registry's 401 to an anonymous request, with the advice", err)
		}
		for _, call := range a.CallsTo(testenv.AzureToken)[tokenCalls:] {
			if _, _, ok := basicAuth(call); ok {
				t.Error("the registry's token service was sent credentials")
			}
		}
		if n := len(a.CallsTo(testenv.AzureEntra)); n != before {
			t.Errorf("%d Entra ID requests", n-before)
		}
	})
}

// acrConfig is a registries.conf whose entry for example.azurecr.io sends
// its requests to reg, with the token service the registry names among
// the hosts it may reach.
func acrConfig(t *testing.T, a *testenv.Azure, reg *testenv.Registry, fields ...string) func() *config.Config {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "registries:\n- name: acr\n  prefix: %s\n  api_url: http://%s\n  internal_hosts: [%s]\n", testRegistry, reg.Host, a.TokenServiceHost())
	for _, f := range fields {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	cfg, err := config.Parse("registries.conf", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return func() *config.Config { return cfg }
}

// basicAuth reads the user and password a call sent.
func basicAuth(call testenv.AzureCall) (user, password string, ok bool) {
	return (&http.Request{Header: call.Header}).BasicAuth()
}
