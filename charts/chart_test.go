// Package charts holds the Helm chart of the controller. Its tests lint and
// render the chart with the helm that `make testbin` builds, hold it to the
// install manifests (the same Role, the same environment from the same
// ConfigMap keys) and have a real API server accept what it renders.
package charts

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

const (
	chartDir = "argocd-image-updater"
	// The release name that gives the names of manifests/install.yaml.
	releaseName = "argocd-image-updater"
	namespace   = testenv.ArgoCDNamespace
	seedValues  = "testdata/seed003-values.yaml"
	allValues   = "testdata/everything-values.yaml"
	crdName     = "CustomResourceDefinition/imageupdaters.argocd-image-updater.argoproj.io"
)

// helm runs the helm of the test servers with configuration and cache of its
// own, so the user's repositories and plugins play no part.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(testenv.Helm(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+dir+"/cache", "HELM_CONFIG_HOME="+dir+"/config", "HELM_DATA_HOME="+dir+"/data")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out, nil
}

// objects is the output of helm template.
type objects []*unstructured.Unstructured

// render runs helm template for a release in Argo CD's namespace; args add
// values files (-f) and single values (--set).
func render(t *testing.T, release string, args ...string) objects {
	t.Helper()
	out, err := helm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.DecodeYAML(t, out)
}

// names lists the objects as kind/name, sorted.
func (objs objects) names() []string {
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	slices.Sort(names)
	return names
}

// find returns the object of a kind and name, or nil.
func (objs objects) find(kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// get decodes the object of a kind and name into a typed value.
func get[T any](t *testing.T, objs objects, kind, name string) *T {
	t.Helper()
	o := objs.find(kind, name)
	if o == nil {
		t.Fatalf("no %s %s among %v", kind, name, objs.names())
	}
	return convertObject[T](t, o)
}

// installObjects are the objects of a file under manifests/.
func installObjects(t *testing.T, file string) objects {
	t.Helper()
	data, err := os.ReadFile("../manifests/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.DecodeYAML(t, data)
}

// container is the controller's container of a Deployment.
func container(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "argocd-image-updater" {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container argocd-image-updater", d.Name)
	return corev1.Container{}
}

// volume returns the pod volume of a name, or nil.
func volume(d *appsv1.Deployment, name string) *corev1.Volume {
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &d.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// fileMode prints a volume's mode as chmod takes it.
func fileMode(m *int32) string {
	if m == nil {
		return "unset"
	}
	return fmt.Sprintf("%04o", *m)
}

// wiredKeys are the keys of a ConfigMap that the Deployment reads, as
// environment variables or as files.
func wiredKeys(t *testing.T, d *appsv1.Deployment, configMap string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, e := range container(t, d).Env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == configMap {
			keys[e.ValueFrom.ConfigMapKeyRef.Key] = true
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == configMap {
			for _, item := range v.ConfigMap.Items {
				keys[item.Key] = true
			}
		}
	}
	return keys
}

func TestLint(t *testing.T) {
	for _, values := range []string{"", seedValues, allValues} {
		args := []string{"lint", "--strict", chartDir}
		if values != "" {
			args = append(args, "--values", values)
		}
		if _, err := helm(t, args...); err != nil {
			t.Error(err)
		}
	}
}

// TestDefaultValues renders the objects of manifests/install.yaml under
// their names, and a Deployment that runs the controller as install.yaml
// does.
func TestDefaultValues(t *testing.T) {
	objs := render(t, releaseName)
	want := []string{
		"ClusterRole/argocd-image-updater", "ClusterRoleBinding/argocd-image-updater",
		"ConfigMap/argocd-image-updater-config", "ConfigMap/argocd-image-updater-ssh-config",
		crdName,
		"Deployment/argocd-image-updater", "Role/argocd-image-updater", "RoleBinding/argocd-image-updater",
		"ServiceAccount/argocd-image-updater",
	}
	if diff := cmp.Diff(want, objs.names()); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); clusterScoped(o) != (ns == "") || !clusterScoped(o) && ns != namespace {
			t.Errorf("%s %s in namespace %q", o.GetKind(), o.GetName(), ns)
		}
	}

	cm := get[corev1.ConfigMap](t, objs, "ConfigMap", "argocd-image-updater-config")
	wantData := map[string]string{"log.level": "info", "git.commit-sign-off": "false", "kube.events": "false"}
	if diff := cmp.Diff(wantData, cm.Data); diff != "" {
		t.Errorf("ConfigMap data (-want +got):\n%s", diff)
	}

	got := get[appsv1.Deployment](t, objs, "Deployment", "argocd-image-updater")
	base := get[appsv1.Deployment](t, installObjects(t, "install.yaml"), "Deployment", "argocd-image-updater")
	gc, bc := container(t, got), container(t, base)
	if gc.Image != bc.Image {
		t.Errorf("image %s, install.yaml runs %s", gc.Image, bc.Image)
	}
	if diff := cmp.Diff(bc.Args, gc.Args); diff != "" {
		t.Errorf("args (-install.yaml +chart):\n%s", diff)
	}
	if diff := cmp.Diff(bc.Env, gc.Env); diff != "" {
		t.Errorf("environment (-install.yaml +chart):\n%s", diff)
	}
	for _, part := range []struct {
		name       string
		base, chrt any
	}{
		{"ports", bc.Ports, gc.Ports},
		{"liveness probe", bc.LivenessProbe, gc.LivenessProbe},
		{"readiness probe", bc.ReadinessProbe, gc.ReadinessProbe},
		{"volume mounts", bc.VolumeMounts, gc.VolumeMounts},
		{"volumes", base.Spec.Template.Spec.Volumes, got.Spec.Template.Spec.Volumes},
		{"strategy", base.Spec.Strategy, got.Spec.Strategy},
		{"replicas", base.Spec.Replicas, got.Spec.Replicas},
		{"termination grace period", base.Spec.Template.Spec.TerminationGracePeriodSeconds, got.Spec.Template.Spec.TerminationGracePeriodSeconds},
	} {
		if diff := cmp.Diff(part.base, part.chrt); diff != "" {
			t.Errorf("%s (-install.yaml +chart):\n%s", part.name, diff)
		}
	}
	sc := gc.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("container security context %+v", sc)
	}
	if got.Spec.Template.Spec.ServiceAccountName != "argocd-image-updater" {
		t.Errorf("ServiceAccount %q", got.Spec.Template.Spec.ServiceAccountName)
	}
	for key := range cm.Data {
		if !wiredKeys(t, got, cm.Name)[key] {
			t.Errorf("ConfigMap key %s reaches the controller neither as a variable nor as a file", key)
		}
	}
}

// TestRoleMatchesInstallManifest keeps the chart's Role and the kustomize
// base's from drifting apart.
func TestRoleMatchesInstallManifest(t *testing.T) {
	base := get[rbacv1.Role](t, installObjects(t, "base/rbac.yaml"), "Role", "argocd-image-updater")
	chart := get[rbacv1.Role](t, render(t, releaseName), "Role", "argocd-image-updater")
	if diff := cmp.Diff(base.Rules, chart.Rules); diff != "" {
		t.Errorf("Role rules (-manifests/base/rbac.yaml +chart):\n%s", diff)
	}
	// The ClusterRole grants, everywhere, what the cluster-wide install
	// grants for Applications in other namespaces (docs/configuration.md).
	wide := get[rbacv1.ClusterRole](t, installObjects(t, "cluster-wide/clusterrole.yaml"), "ClusterRole", "argocd-image-updater")
	cr := get[rbacv1.ClusterRole](t, render(t, releaseName), "ClusterRole", "argocd-image-updater")
	if diff := cmp.Diff(wide.Rules, cr.Rules); diff != "" {
		t.Errorf("ClusterRole rules (-manifests/cluster-wide +chart):\n%s", diff)
	}
}

// TestSeed003Values installs seed 003's setup from community chart values:
// the login script is mounted executable where registries.conf runs it, the
// ServiceAccount carries the IAM role, and extraArgs and extraEnv reach the
// container.
func TestSeed003Values(t *testing.T) {
	objs := render(t, releaseName, "--values", seedValues)
	data, err := os.ReadFile(seedValues)
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		ServiceAccount struct{ Annotations map[string]string }
		AuthScripts    struct{ Scripts map[string]string }
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}

	sa := get[corev1.ServiceAccount](t, objs, "ServiceAccount", "argocd-image-updater")
	const roleARN = "arn:aws:iam::123456789012:role/role-for-image-updater"
	if got := sa.Annotations["eks.amazonaws.com/role-arn"]; got != roleARN {
		t.Errorf("ServiceAccount role ARN %q, want %q", got, roleARN)
	}

	cm := get[corev1.ConfigMap](t, objs, "ConfigMap", "argocd-image-updater-config")
	cfg, err := config.Parse("registries.conf", []byte(cm.Data["registries.conf"]))
	if err != nil {
		t.Fatalf("registries.conf: %v\n%s", err, cm.Data["registries.conf"])
	}
	const host = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com"
	ecrRef, err := imageref.Parse(host + "/eks-app")
	if err != nil {
		t.Fatal(err)
	}
	ep := cfg.EndpointFor(ecrRef)
	if ep.Prefix != host || ep.Credentials != "ext:/scripts/ecr-login.sh" || ep.CredsExpire != 10*time.Hour {
		t.Errorf("ECR endpoint %+v", ep)
	}

	// Follow the ext: path to the file the pod will have there.
	dep := get[appsv1.Deployment](t, objs, "Deployment", "argocd-image-updater")
	c := container(t, dep)
	script := strings.TrimPrefix(ep.Credentials, "ext:")
	dir, file := path.Split(script)
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.MountPath == strings.TrimSuffix(dir, "/") {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil {
		t.Fatalf("nothing is mounted at %s: %+v", dir, c.VolumeMounts)
	}
	vol := volume(dep, mount.Name)
	if vol == nil || vol.ConfigMap == nil {
		t.Fatalf("volume %s is not a ConfigMap: %+v", mount.Name, vol)
	}
	if m := vol.ConfigMap.DefaultMode; m == nil || *m != 0o755 {
		t.Errorf("script volume mode %s, want 0755", fileMode(m))
	}
	if len(vol.ConfigMap.Items) != 0 {
		t.Errorf("script volume picks items %+v; every script should be there", vol.ConfigMap.Items)
	}
	scripts := get[corev1.ConfigMap](t, objs, "ConfigMap", vol.ConfigMap.Name)
	if vol.ConfigMap.Name != "argocd-image-updater-authscripts" {
		t.Errorf("scripts ConfigMap %s", vol.ConfigMap.Name)
	}
	if got, want := scripts.Data[file], values.AuthScripts.Scripts["ecr-login.sh"]; got != want || !strings.HasPrefix(got, "#!/bin/sh\n") {
		t.Errorf("%s in the scripts ConfigMap:\n%q\nwant\n%q", file, got, want)
	}

	if diff := cmp.Diff([]string{"run", "--interval", "5m", "--max-concurrency=5"}, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	base := container(t, get[appsv1.Deployment](t, installObjects(t, "install.yaml"), "Deployment", "argocd-image-updater"))
	wantEnv := append(slices.Clone(base.Env), corev1.EnvVar{Name: "AWS_REGION", Value: "ap-northeast-1"})
	if diff := cmp.Diff(wantEnv, c.Env); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if objs.find("ConfigMap", "argocd-image-updater-authscripts") == nil {
		t.Error("no scripts ConfigMap")
	}
}

// TestConfigValues maps every config value to its ConfigMap key, and the
// token to the Secret the container reads.
func TestConfigValues(t *testing.T) {
	objs := render(t, releaseName, "--values", allValues)
	cm := get[corev1.ConfigMap](t, objs, "ConfigMap", "argocd-image-updater-config")
	want := map[string]string{
		"applications_api":            "kubernetes",
		"argocd.server_addr":          "argocd-server.argocd",
		"argocd.grpc_web":             "true",
		"argocd.insecure":             "true",
		"argocd.plaintext":            "false",
		"log.level":                   "debug",
		"git.user":                    "image-bot",
		"git.email":                   "image-bot@example.com",
		"git.commit-message-template": "build: update {{ .AppName }}\n",
		"git.commit-signing-key":      "/app/signing/id_ed25519",
		"git.commit-signing-method":   "ssh",
		"git.commit-sign-off":         "true",
		"kube.events":                 "true",
		"webhook.enable":              "true",
		"webhook.port":                "9443",
		"webhook.ratelimit-allowed":   "600",
	}
	if diff := cmp.Diff(want, cm.Data); diff != "" {
		t.Errorf("ConfigMap data (-want +got):\n%s", diff)
	}
	dep := get[appsv1.Deployment](t, objs, "Deployment", "argocd-image-updater")
	for key := range cm.Data {
		if !wiredKeys(t, dep, cm.Name)[key] {
			t.Errorf("ConfigMap key %s reaches the controller neither as a variable nor as a file", key)
		}
	}

	secret := objs.find("Secret", "argocd-image-updater-secret")
	if secret == nil {
		t.Fatal("no Secret for config.argocd.token")
	}
	enc, _, _ := unstructured.NestedString(secret.Object, "data", "argocd.token")
	if tok, err := base64.StdEncoding.DecodeString(enc); err != nil || string(tok) != "not-a-real-token" {
		t.Errorf("argocd.token %q (%v)", tok, err)
	}
	ssh := get[corev1.ConfigMap](t, objs, "ConfigMap", "argocd-image-updater-ssh-config")
	if got := ssh.Data["config"]; got != "Host *\n  ServerAliveInterval 30\n" {
		t.Errorf("SSH config %q", got)
	}

	// Other names for the ConfigMap and Secret are followed by the
	// Deployment.
	objs = render(t, releaseName, "--set", "config.name=updater-settings,config.argocd.tokenSecretName=updater-token,config.argocd.token=x")
	dep = get[appsv1.Deployment](t, objs, "Deployment", "argocd-image-updater")
	if objs.find("ConfigMap", "updater-settings") == nil || objs.find("Secret", "updater-token") == nil {
		t.Errorf("objects %v", objs.names())
	}
	if keys := wiredKeys(t, dep, "updater-settings"); !keys["log.level"] || !keys["registries.conf"] {
		t.Errorf("the Deployment does not read updater-settings: %v", keys)
	}
	for _, e := range container(t, dep).Env {
		if e.Name == "ARGOCD_TOKEN" && e.ValueFrom.SecretKeyRef.Name != "updater-token" {
			t.Errorf("ARGOCD_TOKEN from %s", e.ValueFrom.SecretKeyRef.Name)
		}
	}
}

// TestApplicationsAPIArgoCD fails at install time: the controller refuses
// the Argo CD API server and would only exit.
func TestApplicationsAPIArgoCD(t *testing.T) {
	_, err := helm(t, "template", releaseName, chartDir, "--set", "config.applicationsAPIKind=argocd")
	if err == nil || !strings.Contains(err.Error(), `config.applicationsAPIKind "argocd" is not supported`) {
		t.Errorf("helm template with applicationsAPIKind argocd: %v", err)
	}
}

// TestNames follows the community chart's naming: the release name, the
// overrides, and the ServiceAccount and RBAC switches.
func TestNames(t *testing.T) {
	tests := []struct {
		release string
		set     string
		name    string // of the Deployment, Role, bindings and ServiceAccount
	}{
		{release: "argocd-image-updater", name: "argocd-image-updater"},
		{release: "argocd-image-updater-prod", name: "argocd-image-updater-prod"},
		{release: "updater", name: "updater-argocd-image-updater"},
		{release: "updater", set: "fullnameOverride=image-updater", name: "image-updater"},
		{release: "team", set: "nameOverride=updater", name: "team-updater"},
		{release: "my-updater", set: "nameOverride=updater", name: "my-updater"},
	}
	for _, tt := range tests {
		t.Run(tt.release+"/"+tt.set, func(t *testing.T) {
			var args []string
			if tt.set != "" {
				args = []string{"--set", tt.set}
			}
			objs := render(t, tt.release, args...)
			for _, kind := range []string{"Deployment", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
				if objs.find(kind, tt.name) == nil {
					t.Errorf("no %s %s among %v", kind, tt.name, objs.names())
				}
			}
			// The settings keep the names the controller's users know.
			if objs.find("ConfigMap", "argocd-image-updater-config") == nil {
				t.Errorf("no ConfigMap argocd-image-updater-config among %v", objs.names())
			}
			rb := get[rbacv1.RoleBinding](t, objs, "RoleBinding", tt.name)
			if rb.RoleRef.Name != tt.name || rb.Subjects[0].Name != tt.name {
				t.Errorf("RoleBinding %+v", rb)
			}
		})
	}

	switches := []struct {
		set       string
		names     []string
		account   string
		namespace string
	}{
		{set: "serviceAccount.create=false,serviceAccount.name=existing", account: "existing", names: []string{
			"ClusterRole/argocd-image-updater", "ClusterRoleBinding/argocd-image-updater", "ConfigMap/argocd-image-updater-config",
			"ConfigMap/argocd-image-updater-ssh-config", crdName, "Deployment/argocd-image-updater", "Role/argocd-image-updater",
			"RoleBinding/argocd-image-updater"}},
		{set: "serviceAccount.create=false", account: "default"},
		{set: "serviceAccount.name=updater", account: "updater"},
		{set: "rbac.enabled=false", account: "argocd-image-updater", names: []string{
			"ConfigMap/argocd-image-updater-config", "ConfigMap/argocd-image-updater-ssh-config", crdName,
			"Deployment/argocd-image-updater", "ServiceAccount/argocd-image-updater"}},
		{set: "createClusterRoles=false", account: "argocd-image-updater", names: []string{
			"ConfigMap/argocd-image-updater-config", "ConfigMap/argocd-image-updater-ssh-config", crdName,
			"Deployment/argocd-image-updater", "Role/argocd-image-updater", "RoleBinding/argocd-image-updater",
			"ServiceAccount/argocd-image-updater"}},
		{set: "namespaceOverride=tools", account: "argocd-image-updater", namespace: "tools"},
	}
	for _, s := range switches {
		t.Run(s.set, func(t *testing.T) {
			objs := render(t, releaseName, "--set", s.set)
			if s.names != nil {
				if diff := cmp.Diff(s.names, objs.names()); diff != "" {
					t.Errorf("objects (-want +got):\n%s", diff)
				}
			}
			dep := get[appsv1.Deployment](t, objs, "Deployment", "argocd-image-updater")
			if got := dep.Spec.Template.Spec.ServiceAccountName; got != s.account {
				t.Errorf("pod runs as %q, want %q", got, s.account)
			}
			wantNS := s.namespace
			if wantNS == "" {
				wantNS = namespace
			}
			for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
				if o := objs.find(kind, "argocd-image-updater"); o != nil {
					subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
					want := []any{map[string]any{"kind": "ServiceAccount", "name": s.account, "namespace": wantNS}}
					if diff := cmp.Diff(want, subjects); diff != "" {
						t.Errorf("%s subjects (-want +got):\n%s", kind, diff)
					}
				}
			}
			for _, o := range objs {
				if !clusterScoped(o) && o.GetNamespace() != wantNS {
					t.Errorf("%s %s in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), wantNS)
				}
			}
		})
	}
}

// TestMetrics renders the metrics Service only with metrics.enabled, and the
// ServiceMonitor only with both switches, pointed at that Service.
func TestMetrics(t *testing.T) {
	for _, tt := range []struct {
		set                string
		service, monitor   bool
		monitorNamespace   string
		monitorExtraLabels map[string]string
	}{
		{set: "metrics.enabled=false"},
		{set: "metrics.serviceMonitor.enabled=true"},
		{set: "metrics.enabled=true", service: true},
		{set: "metrics.enabled=true,metrics.serviceMonitor.enabled=true", service: true, monitor: true, monitorNamespace: namespace},
		{set: "metrics.enabled=true,metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.namespace=monitoring,metrics.serviceMonitor.selector.release=prometheus",
			service: true, monitor: true, monitorNamespace: "monitoring", monitorExtraLabels: map[string]string{"release": "prometheus"}},
	} {
		t.Run(tt.set, func(t *testing.T) {
			objs := render(t, releaseName, "--set", tt.set)
			svcObj := objs.find("Service", "argocd-image-updater-metrics")
			smObj := objs.find("ServiceMonitor", "argocd-image-updater-metrics")
			if (svcObj != nil) != tt.service || (smObj != nil) != tt.monitor {
				t.Fatalf("objects %v", objs.names())
			}
			if !tt.service {
				return
			}
			svc := get[corev1.Service](t, objs, "Service", "argocd-image-updater-metrics")
			dep := get[appsv1.Deployment](t, objs, "Deployment", "argocd-image-updater")
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8081 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
				t.Errorf("Service ports %+v", svc.Spec.Ports)
			}
			declared := false
			for _, p := range container(t, dep).Ports {
				declared = declared || p.Name == "metrics" && p.ContainerPort == 8081
			}
			if !declared {
				t.Error("the container declares no metrics port 8081")
			}
			for k, v := range svc.Spec.Selector {
				if dep.Spec.Template.Labels[k] != v {
					t.Errorf("Service selector %v does not pick the pods (%v)", svc.Spec.Selector, dep.Spec.Template.Labels)
				}
			}
			if !tt.monitor {
				return
			}
			if smObj.GetNamespace() != tt.monitorNamespace {
				t.Errorf("ServiceMonitor in %q, want %q", smObj.GetNamespace(), tt.monitorNamespace)
			}
			for k, v := range tt.monitorExtraLabels {
				if smObj.GetLabels()[k] != v {
					t.Errorf("ServiceMonitor labels %v lack %s=%s", smObj.GetLabels(), k, v)
				}
			}
			match, _, _ := unstructured.NestedStringMap(smObj.Object, "spec", "selector", "matchLabels")
			for k, v := range match {
				if svc.Labels[k] != v {
					t.Errorf("ServiceMonitor selector %v does not pick the Service (%v)", match, svc.Labels)
				}
			}
			names, _, _ := unstructured.NestedStringSlice(smObj.Object, "spec", "namespaceSelector", "matchNames")
			if !slices.Contains(names, svc.Namespace) {
				t.Errorf("ServiceMonitor looks in %v, the Service is in %s", names, svc.Namespace)
			}
			endpoints, _, _ := unstructured.NestedSlice(smObj.Object, "spec", "endpoints")
			if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != svc.Spec.Ports[0].Name {
				t.Errorf("ServiceMonitor endpoints %v", endpoints)
			}
		})
	}
}

// TestNetworkPolicy: networkPolicy.enabled renders v1.x's
// allow-metrics-traffic and allow-webhook-traffic, which select the
// controller's pods and admit what manifests/network-policy admits to the
// install's: its metrics and webhook ports, wherever containerPorts put
// them, from v1.x's namespaces or the peers given.
func TestNetworkPolicy(t *testing.T) {
	install := map[string][]string{}
	var dep *appsv1.Deployment
	var policies []networkingv1.NetworkPolicy
	for _, o := range testenv.DecodeYAML(t, testenv.Kustomize(t, "../manifests/testdata/network-policy")) {
		switch o.GetKind() {
		case "Deployment":
			dep = convertObject[appsv1.Deployment](t, o)
		case "NetworkPolicy":
			policies = append(policies, *convertObject[networkingv1.NetworkPolicy](t, o))
		}
	}
	for _, p := range policies {
		install[p.Name] = testenv.Admitted(t, p, dep.Spec.Template)
	}
	if len(install) != 2 {
		t.Fatalf("the install's policies: %v", install)
	}
	if objs := render(t, releaseName); slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "NetworkPolicy" }) {
		t.Errorf("NetworkPolicies by default: %v", objs.names())
	}
	for _, tt := range []struct {
		release, set string
		prefix       string
		want         map[string][]string // nil: the install's
	}{
		{release: releaseName, set: "networkPolicy.enabled=true"},
		{release: releaseName, set: "networkPolicy.enabled=true,containerPorts.metrics=8443,containerPorts.webhook=9443"},
		{release: "team", set: "networkPolicy.enabled=true", prefix: "team-argocd-image-updater-"},
		{release: releaseName, set: "networkPolicy.enabled=true,networkPolicy.webhookFrom=null", want: map[string][]string{
			"allow-metrics-traffic": install["allow-metrics-traffic"], "allow-webhook-traffic": {"webhook from anywhere"}}},
	} {
		t.Run(tt.release+"/"+tt.set, func(t *testing.T) {
			objs := render(t, tt.release, "--set", tt.set)
			var dep *appsv1.Deployment
			got := map[string][]string{}
			for _, o := range objs {
				if o.GetKind() == "Deployment" {
					dep = convertObject[appsv1.Deployment](t, o)
				}
			}
			for _, o := range objs {
				if o.GetKind() == "NetworkPolicy" {
					got[strings.TrimPrefix(o.GetName(), tt.prefix)] = testenv.Admitted(t, *convertObject[networkingv1.NetworkPolicy](t, o), dep.Spec.Template)
				}
			}
			want := tt.want
			if want == nil {
				want = install
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("what the policies admit to the pods (-want +got):\n%s", diff)
			}
		})
	}
}

// convertObject decodes an object into a typed value.
func convertObject[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	v := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return v
}

// dualStack sets the IP families of both Services, the metrics one too as
// argo-helm's 1.x chart does from 1.3.1; by default neither has any.
func TestDualStack(t *testing.T) {
	for _, tt := range []struct {
		set        string
		wantPolicy string
		families   []corev1.IPFamily
	}{
		{set: "metrics.enabled=true,service.enabled=true"},
		{set: "metrics.enabled=true,service.enabled=true,dualStack.ipFamilyPolicy=PreferDualStack,dualStack.ipFamilies={IPv6,IPv4}",
			wantPolicy: "PreferDualStack", families: []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}},
	} {
		t.Run(tt.set, func(t *testing.T) {
			objs := render(t, releaseName, "--set", tt.set)
			for _, name := range []string{"argocd-image-updater-metrics", "argocd-image-updater"} {
				svc := get[corev1.Service](t, objs, "Service", name)
				policy := ""
				if svc.Spec.IPFamilyPolicy != nil {
					policy = string(*svc.Spec.IPFamilyPolicy)
				}
				if policy != tt.wantPolicy || !slices.Equal(svc.Spec.IPFamilies, tt.families) {
					t.Errorf("Service %s: ipFamilyPolicy %q, ipFamilies %v; want %q, %v", name, policy, svc.Spec.IPFamilies, tt.wantPolicy, tt.families)
				}
			}
		})
	}
}

// TestServerSideDryRun has a real API server validate what the chart
// renders, with a minimal ServiceMonitor CRD so that object is checked too.
func TestServerSideDryRun(t *testing.T) {
	k := testenv.StartKube(t, testenv.WithCRDs(
		testenv.ArgoCDCRD(t, testenv.ArgoCDModule, testenv.ArgoCDVersion(t)),
		"testdata/servicemonitor-crd.yaml",
	))
	for _, values := range []string{"", seedValues, allValues} {
		t.Run(path.Base(values), func(t *testing.T) {
			var args []string
			if values != "" {
				args = []string{"--values", values}
			}
			objs := render(t, releaseName, args...)
			for _, err := range k.DryRunApply(t, namespace, objs) {
				t.Error(err)
			}
			if values == allValues && objs.find("ServiceMonitor", "argocd-image-updater-metrics") == nil {
				t.Errorf("no ServiceMonitor among %v", objs.names())
			}
		})
	}
}

// The webhook values of the community chart reach the controller: the
// ConfigMap keys and Secret keys the Deployment reads, the container port,
// and the Service and Ingress that route to it.
func TestWebhook(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		objs := render(t, releaseName)
		if objs.find("Service", "argocd-image-updater") != nil || objs.find("Ingress", "argocd-image-updater-ingress") != nil {
			t.Errorf("objects %v", objs.names())
		}
	})
	t.Run("everything", func(t *testing.T) {
		objs := render(t, releaseName, "--values", allValues)
		cm := get[corev1.ConfigMap](t, objs, "ConfigMap", "argocd-image-updater-config")
		for k, want := range map[string]string{"webhook.enable": "true", "webhook.port": "9443", "webhook.ratelimit-allowed": "600"} {
			if cm.Data[k] != want {
				t.Errorf("ConfigMap %s = %q, want %q", k, cm.Data[k], want)
			}
		}
		if _, ok := cm.Data["webhook.require-secret"]; ok {
			t.Error("webhook.require-secret written though it is the default")
		}
		dep := get[appsv1.Deployment](t, objs, "Deployment", "argocd-image-updater")
		wired := wiredKeys(t, dep, "argocd-image-updater-config")
		for _, k := range []string{"webhook.enable", "webhook.port", "webhook.ratelimit-allowed", "webhook.require-secret"} {
			if !wired[k] {
				t.Errorf("the Deployment does not read %s", k)
			}
		}
		sec := get[corev1.Secret](t, objs, "Secret", "argocd-image-updater-secret")
		env := map[string]string{}
		for _, e := range container(t, dep).Env {
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && r.SecretKeyRef.Name == sec.Name {
				env[r.SecretKeyRef.Key] = e.Name
			}
		}
		for key, want := range map[string]string{"webhook.quay-secret": "quay-example-secret", "webhook.artifact-registry-secret": "pubsub-example-secret"} {
			if string(sec.Data[key]) != want {
				t.Errorf("Secret %s = %q, want %q", key, sec.Data[key], want)
			}
			if env[key] == "" {
				t.Errorf("no variable reads the Secret's %s", key)
			}
		}
		port := int32(0)
		for _, p := range container(t, dep).Ports {
			if p.Name == "webhook" {
				port = p.ContainerPort
			}
		}
		if port != 9443 {
			t.Errorf("container port webhook = %d, want 9443", port)
		}
		svc := get[corev1.Service](t, objs, "Service", "argocd-image-updater")
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 ||
			svc.Spec.Ports[0].TargetPort.String() != "webhook" || !slices.Equal(svc.Spec.LoadBalancerSourceRanges, []string{"203.0.113.0/24"}) {
			t.Errorf("Service spec %+v", svc.Spec)
		}
		for k, v := range svc.Spec.Selector {
			if dep.Spec.Template.Labels[k] != v {
				t.Errorf("Service selector %v does not pick the pods (%v)", svc.Spec.Selector, dep.Spec.Template.Labels)
			}
		}
		ing := objs.find("Ingress", "argocd-image-updater-ingress")
		if ing == nil {
			t.Fatalf("no Ingress: %v", objs.names())
		}
		rules, _, _ := unstructured.NestedSlice(ing.Object, "spec", "rules")
		if len(rules) != 1 {
			t.Fatalf("Ingress rules %v", rules)
		}
		rule := rules[0].(map[string]any)
		paths, _, _ := unstructured.NestedSlice(rule, "http", "paths")
		backend, _, _ := unstructured.NestedMap(paths[0].(map[string]any), "backend", "service")
		if rule["host"] != "updater.example.com" || paths[0].(map[string]any)["path"] != "/webhook" ||
			backend["name"] != svc.Name || fmt.Sprint(backend["port"].(map[string]any)["number"]) != "8080" {
			t.Errorf("Ingress rule %v", rule)
		}
	})
	for _, tt := range []struct {
		set, wantErr string
	}{
		{set: "containerPort=8081", wantErr: "webhook port 8081"},
		{set: "containerPorts.health=8082", wantErr: "webhook port 8082"},
		{set: "webhook.secrets.gitlab=x", wantErr: "webhook.secrets.gitlab: unknown registry type"},
	} {
		t.Run(tt.set, func(t *testing.T) {
			_, err := helm(t, "template", releaseName, chartDir, "--namespace", namespace, "--set", tt.set)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestV1ChartValues renders a values file written for argo-helm's 1.x
// chart and checks the effect of each of its keys.
func TestV1ChartValues(t *testing.T) {
	objs := render(t, releaseName, "-f", "testdata/v1-chart-values.yaml")

	cm := get[corev1.ConfigMap](t, objs, "ConfigMap", "argocd-image-updater-config")
	for key, want := range map[string]string{
		"kube.events": "true", "git.user": "image-bot", "git.email": "image-bot@example.com",
		"git.commit-message-template": "chore: update {{ .AppName }}\n", "git.commit-signing-key": "/app/ssh-keys/id_rsa",
		"git.commit-signing-method": "ssh", "git.commit-sign-off": "true", "log.level": "debug",
		"watch.namespaces": "*", "max_concurrent_apps": "7",
	} {
		if got := cm.Data[key]; got != want {
			t.Errorf("ConfigMap %s = %q, want %q", key, got, want)
		}
	}
	if !strings.Contains(cm.Data["registries.conf"], "ext:/scripts/ecr-login.sh") {
		t.Errorf("registries.conf %q", cm.Data["registries.conf"])
	}
	d := get[appsv1.Deployment](t, objs, "Deployment", "argocd-image-updater")
	for key := range cm.Data {
		if !wiredKeys(t, d, cm.Name)[key] {
			t.Errorf("ConfigMap key %s reaches the controller neither as a variable nor as a file", key)
		}
	}

	// The CRD, from the templates, kept and upgraded with the release.
	crd := objs.must(t, "CustomResourceDefinition", "imageupdaters.argocd-image-updater.argoproj.io")
	if a := crd.GetAnnotations(); a["helm.sh/resource-policy"] != "keep" || a["team"] != "platform" || crd.GetLabels()["owner"] != "platform" {
		t.Errorf("CRD annotations %v, labels %v", a, crd.GetLabels())
	}
	if got := render(t, releaseName, "--set", "crds.install=false").names(); slices.Contains(got, "CustomResourceDefinition/imageupdaters.argocd-image-updater.argoproj.io") {
		t.Error("crds.install=false still renders the CRD")
	}

	// containerPorts: the controller's ports and the Pod's.
	c := container(t, d)
	for _, want := range []string{"--health-port=8081", "--metrics-port=8443"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if diff := cmp.Diff(map[string]int32{"health": 8081, "metrics": 8443, "webhook": 8082}, ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	// service.enabled: the webhook's Service without webhook.enabled.
	objs.must(t, "Service", "argocd-image-updater")
	secret := get[corev1.Secret](t, objs, "Secret", "argocd-image-updater-tls")
	if secret.Type != corev1.SecretTypeTLS || string(secret.Data["tls.crt"]) != "-----BEGIN CERTIFICATE-----" {
		t.Errorf("TLS Secret %+v", secret)
	}
	sm := objs.must(t, "ServiceMonitor", "argocd-image-updater-metrics")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["scheme"] != "https" || endpoints[0].(map[string]any)["tlsConfig"] == nil {
		t.Errorf("ServiceMonitor endpoints %v", endpoints)
	}
}

// TestV0ChartPorts: values files copied from the 0.x chart keep
// rendering: its containerPort 8080 (its health port), an ingress without
// webhook.enabled.
func TestV0ChartPorts(t *testing.T) {
	objs := render(t, releaseName, "--set", "containerPort=8080", "--set", "ingress.enabled=true", "--set", "ingress.hostname=updater.example.com")
	c := container(t, get[appsv1.Deployment](t, objs, "Deployment", "argocd-image-updater"))
	for _, p := range c.Ports {
		if p.Name == "webhook" && p.ContainerPort != 8082 {
			t.Errorf("webhook port %d, want 8082", p.ContainerPort)
		}
	}
	objs.must(t, "Ingress", "argocd-image-updater-ingress")
	objs.must(t, "Service", "argocd-image-updater")
}

// must returns the object of a kind and name, failing the test without it.
func (objs objects) must(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	if o := objs.find(kind, name); o != nil {
		return o
	}
	t.Fatalf("no %s %s among %v", kind, name, objs.names())
	return nil
}

// clusterScoped tells the objects that live in no namespace.
func clusterScoped(o *unstructured.Unstructured) bool {
	return strings.HasPrefix(o.GetKind(), "Cluster") || o.GetKind() == "CustomResourceDefinition"
}
