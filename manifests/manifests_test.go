// Package manifests holds the install manifests; its tests check that they
// build, are rendered, and are accepted by an API server.
package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/testenv"
)

func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	out, err := exec.Command("kubectl", "kustomize", dir).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return out
}

func TestInstallYAMLIsRendered(t *testing.T) {
	want := kustomize(t, "base")
	got, err := os.ReadFile("install.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("manifests/install.yaml is stale: run `make manifests`")
	}
}

func objects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
	}
	return objs
}

func TestInstallYAMLServerSideDryRun(t *testing.T) {
	k := testenv.StartKube(t)
	data, err := os.ReadFile("install.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(k.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn := dynamic.NewForConfigOrDie(k.Config)
	kinds := map[string]bool{}
	for _, obj := range objects(t, data) {
		gvk := obj.GroupVersionKind()
		kinds[gvk.Kind+"/"+obj.GetName()] = true
		mapping, err := mapper.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		_, err = dyn.Resource(mapping.Resource).Namespace(testenv.ArgoCDNamespace).
			Apply(t.Context(), obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "test", DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Errorf("server-side dry run of %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
	}
	// The names existing overlays patch.
	for _, want := range []string{
		"ServiceAccount/argocd-image-updater", "Role/argocd-image-updater", "RoleBinding/argocd-image-updater",
		"ConfigMap/argocd-image-updater-config", "ConfigMap/argocd-image-updater-ssh-config",
		"Secret/argocd-image-updater-secret", "Deployment/argocd-image-updater",
	} {
		if !kinds[want] {
			t.Errorf("install.yaml has no %s", want)
		}
	}
}

// find returns the object of a kind and name.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return nil
}

// TestOverlays builds every example, and the overlay of seed 003 as its
// author wrote it with our base in place of the remote install.yaml.
func TestOverlays(t *testing.T) {
	tests := []struct {
		dir          string
		roleARN      string
		gcpSA        string
		scriptMount  bool
		registryHost string
		credentials  string
	}{
		{dir: "testdata/seed003", roleARN: "arn:aws:iam::123456789012:role/role-for-image-updater", scriptMount: true,
			registryHost: "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com", credentials: "ext:/app/scripts/ecr-login.sh"},
		{dir: "examples/ecr-ext-script", roleARN: "arn:aws:iam::123456789012:role/role-for-image-updater", scriptMount: true,
			registryHost: "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com", credentials: "ext:/app/scripts/ecr-login.sh"},
		{dir: "examples/ecr-native", roleARN: "arn:aws:iam::123456789012:role/role-for-image-updater",
			registryHost: "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com"},
		{dir: "examples/gke-workload-identity", gcpSA: "image-updater@my-project.iam.gserviceaccount.com",
			registryHost: "asia-northeast1-docker.pkg.dev", credentials: "gcp"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			objs := objects(t, kustomize(t, tt.dir))
			for _, o := range objs {
				if o.GetNamespace() != "argocd" {
					t.Errorf("%s %s in namespace %q, want argocd", o.GetKind(), o.GetName(), o.GetNamespace())
				}
			}
			sa := find(t, objs, "ServiceAccount", "argocd-image-updater")
			if got := sa.GetAnnotations()["eks.amazonaws.com/role-arn"]; got != tt.roleARN {
				t.Errorf("role ARN annotation %q", got)
			}
			if got := sa.GetAnnotations()["iam.gke.io/gcp-service-account"]; got != tt.gcpSA {
				t.Errorf("GKE service account annotation %q", got)
			}

			cm := find(t, objs, "ConfigMap", "argocd-image-updater-config")
			conf, _, _ := unstructured.NestedString(cm.Object, "data", "registries.conf")
			cfg, err := config.Parse("registries.conf", []byte(conf))
			if err != nil {
				t.Fatalf("registries.conf of %s: %v", tt.dir, err)
			}
			ref, err := imageref.Parse(tt.registryHost + "/app")
			if err != nil {
				t.Fatal(err)
			}
			ep := cfg.EndpointFor(ref)
			if ep.Prefix != tt.registryHost || ep.Credentials != tt.credentials {
				t.Errorf("endpoint for %s: %+v", tt.registryHost, ep)
			}

			dep := find(t, objs, "Deployment", "argocd-image-updater")
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(dep.Object, &d); err != nil {
				t.Fatal(err)
			}
			mounted := false
			for _, c := range d.Spec.Template.Spec.Containers {
				for _, m := range c.VolumeMounts {
					if m.Name == "ecr-login-script" && m.MountPath == "/app/scripts" {
						mounted = true
					}
				}
				if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
					t.Error("the container's root file system is writable")
				}
			}
			if mounted != tt.scriptMount {
				t.Errorf("script mounted: %v, want %v", mounted, tt.scriptMount)
			}
			if tt.scriptMount {
				var mode int32
				for _, v := range d.Spec.Template.Spec.Volumes {
					if v.Name == "ecr-login-script" && v.ConfigMap != nil && v.ConfigMap.DefaultMode != nil {
						mode = *v.ConfigMap.DefaultMode
					}
				}
				if mode != 0o755 {
					t.Errorf("script volume mode %o, want 755", mode)
				}
				// The base's own volume survives the patch.
				if len(d.Spec.Template.Spec.Volumes) < 2 {
					t.Errorf("volumes %v", d.Spec.Template.Spec.Volumes)
				}
			}
		})
	}
}
