// Package manifests holds the install manifests; its tests check that they
// build, are rendered, and are accepted by an API server.
package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	return testenv.Kustomize(t, dir)
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

// objects decodes a multi-document YAML stream.
func objects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	return testenv.DecodeYAML(t, data)
}

// dryRun applies objects with a server-side dry run; namespaced objects
// without a namespace go to the Argo CD namespace, as with
// `kubectl apply -n argocd`.
func dryRun(t *testing.T, k *testenv.Kube, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, err := range k.DryRunApply(t, testenv.ArgoCDNamespace, objs) {
		t.Error(err)
	}
}

// prometheusOperatorVersion is the Prometheus Operator whose CRDs check the
// monitoring examples.
const prometheusOperatorVersion = "v0.85.0"

// prometheusOperatorCRDs returns the ServiceMonitor and PrometheusRule CRDs
// shipped in the Prometheus Operator's module, downloaded into the module
// cache.
func prometheusOperatorCRDs(t *testing.T) []string {
	t.Helper()
	module := "github.com/prometheus-operator/prometheus-operator@" + prometheusOperatorVersion
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", module, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, kind := range []string{"servicemonitors", "prometheusrules"} {
		p := filepath.Join(info.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+kind+".yaml")
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CRD of %s: %v", kind, err)
		}
		paths = append(paths, p)
	}
	return paths
}

// TestServerSideDryRun sends the install, its cluster-wide variant and the
// monitoring examples to one API server that knows the Application,
// ServiceMonitor and PrometheusRule CRDs.
func TestServerSideDryRun(t *testing.T) {
	crds := append([]string{testenv.ArgoCDCRD(t, testenv.ArgoCDModule, testenv.ArgoCDVersion(t))}, prometheusOperatorCRDs(t)...)
	k := testenv.StartKube(t, testenv.WithCRDs(crds...))

	t.Run("install.yaml", func(t *testing.T) {
		data, err := os.ReadFile("install.yaml")
		if err != nil {
			t.Fatal(err)
		}
		objs := objects(t, data)
		dryRun(t, k, objs)
		kinds := map[string]bool{}
		for _, obj := range objs {
			kinds[obj.GetKind()+"/"+obj.GetName()] = true
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
	})
	for _, dir := range []string{"cluster-wide", "monitoring"} {
		t.Run(dir, func(t *testing.T) { dryRun(t, k, objects(t, kustomize(t, dir))) })
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
		dir           string
		roleARN       string
		gcpSA         string
		azureClientID string // the ServiceAccount's annotation; the pod is then labelled for the webhook
		scriptMount   bool
		registryHost  string
		credentials   string
	}{
		{dir: "testdata/seed003", roleARN: "arn:aws:iam::123456789012:role/role-for-image-updater", scriptMount: true,
			registryHost: "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com", credentials: "ext:/app/scripts/ecr-login.sh"},
		{dir: "examples/ecr-ext-script", roleARN: "arn:aws:iam::123456789012:role/role-for-image-updater", scriptMount: true,
			registryHost: "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com", credentials: "ext:/app/scripts/ecr-login.sh"},
		{dir: "examples/ecr-native", roleARN: "arn:aws:iam::123456789012:role/role-for-image-updater",
			registryHost: "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com"},
		{dir: "examples/gke-workload-identity", gcpSA: "image-updater@my-project.iam.gserviceaccount.com",
			registryHost: "asia-northeast1-docker.pkg.dev", credentials: "gcp"},
		{dir: "examples/aks-workload-identity", azureClientID: "5a2cdbd1-6e0c-4d3e-9c8e-0f6c1d2b3a41",
			registryHost: "example.azurecr.io", credentials: "azure"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			objs := objects(t, kustomize(t, tt.dir))
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					continue // cluster-scoped
				}
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
			if got := sa.GetAnnotations()["azure.workload.identity/client-id"]; got != tt.azureClientID {
				t.Errorf("AKS workload identity client ID annotation %q", got)
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
			if got, want := d.Spec.Template.Labels["azure.workload.identity/use"], map[bool]string{true: "true"}[tt.azureClientID != ""]; got != want {
				t.Errorf("pod label azure.workload.identity/use %q, want %q", got, want)
			}
			if d.Spec.Template.Labels["app.kubernetes.io/name"] != "argocd-image-updater" {
				t.Errorf("the base's pod labels are lost: %v", d.Spec.Template.Labels)
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

// TestUpstreamVolumes: the Deployment has the volumes and mounts of Argo
// CD Image Updater's install (both lines) under its names and paths, so
// that overlays patching them apply, and SSH commit signing configured
// as upstream documents finds its key.
func TestUpstreamVolumes(t *testing.T) {
	dep := find(t, objects(t, kustomize(t, "base")), "Deployment", "argocd-image-updater")
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(dep.Object, &d); err != nil {
		t.Fatal(err)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	want := []struct {
		volume, path, subPath, source string
	}{
		{"image-updater-conf", "/app/config", "", "configMap argocd-image-updater-config"},
		{"ssh-known-hosts", "/app/config/ssh", "", "configMap argocd-ssh-known-hosts-cm"},
		{"ssh-config", "/app/.ssh", "", "configMap argocd-image-updater-ssh-config"},
		{"ssh-signing-key", "/app/ssh-keys/id_rsa", "sshPrivateKey", "secret ssh-git-creds"},
		{"argocd-image-updater-tls", "/app/config/tls", "", "secret argocd-image-updater-tls"},
		{"tmp", "/tmp", "", "emptyDir"},
	}
	for _, w := range want {
		m, ok := mounts[w.volume]
		if !ok || m.MountPath != w.path || m.SubPath != w.subPath {
			t.Errorf("mount of %s: %+v, want %s (subPath %q)", w.volume, m, w.path, w.subPath)
		}
		v := volumes[w.volume]
		var source string
		switch {
		case v.ConfigMap != nil:
			source = "configMap " + v.ConfigMap.Name
			if v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional {
				t.Errorf("volume %s: a missing ConfigMap must not keep the Pod from starting", w.volume)
			}
		case v.Secret != nil:
			source = "secret " + v.Secret.SecretName
			if v.Secret.Optional == nil || !*v.Secret.Optional {
				t.Errorf("volume %s: a missing Secret must not keep the Pod from starting", w.volume)
			}
		case v.EmptyDir != nil:
			source = "emptyDir"
		}
		if source != w.source {
			t.Errorf("volume %s from %q, want %q", w.volume, source, w.source)
		}
	}
}
