package settings

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
)

// TestWindows: update windows from either source, a ref's replacing the
// spec's; windows not understood write nothing and name where they are.
func TestWindows(t *testing.T) {
	a := ParseAnnotations(ann("image-list", "nginx", "update-windows", "allow 0 9 * * 1-5 8h Europe/Berlin; deny 0 0 24 12 * 48h", "use-sync-windows", "true"))
	if len(a.Problems) > 0 || a.Windows.String() != "allow 0 9 * * 1-5 8h0m0s Europe/Berlin; deny 0 0 24 12 * 48h0m0s" || !a.UseSyncWindows || a.WindowsInvalid ||
		a.WindowsOrigin != AnnotationOrigin("update-windows") {
		t.Errorf("from annotations: %v %q %v %v %s", a.Problems, a.Windows, a.UseSyncWindows, a.WindowsInvalid, a.WindowsOrigin)
	}
	for _, bad := range [][]string{{"update-windows", "allow 0 9 * * 1-5"}, {"use-sync-windows", "yes"}} {
		a := ParseAnnotations(ann("image-list", "nginx", bad[0], bad[1]))
		if !a.WindowsInvalid || len(a.Problems) != 1 || !strings.HasPrefix(a.Problems[0].Error(), "annotation "+AnnotationPrefix+bad[0]+": ") ||
			!strings.HasSuffix(a.Problems[0].Error(), "nothing is written") {
			t.Errorf("%s %q: invalid %v, problems %v", bad[0], bad[1], a.WindowsInvalid, a.Problems)
		}
	}

	w := func(kind, schedule string) api.UpdateWindow {
		return api.UpdateWindow{Kind: kind, Schedule: schedule, Duration: "1h"}
	}
	iu := &api.ImageUpdater{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"},
		Spec: api.ImageUpdaterSpec{
			UpdateWindows:  []api.UpdateWindow{w("allow", "0 9 * * *")},
			UseSyncWindows: ptr(true),
			ApplicationRefs: []api.ApplicationRef{
				{NamePattern: "own", UpdateWindows: []api.UpdateWindow{w("deny", "0 0 * * *")}, UseSyncWindows: ptr(false), Images: []api.ImageConfig{{ImageName: "nginx"}}},
				{NamePattern: "spec", Images: []api.ImageConfig{{ImageName: "nginx"}}},
				{NamePattern: "bad", UpdateWindows: []api.UpdateWindow{w("allow", "0 9 * * *"), w("allow", "0 25 * * *")}, Images: []api.ImageConfig{{ImageName: "nginx"}}},
			},
		},
	}
	own, spec, bad := ParseImageUpdater(iu, 0), ParseImageUpdater(iu, 1), ParseImageUpdater(iu, 2)
	if own.Windows.String() != "deny 0 0 * * * 1h0m0s" || own.UseSyncWindows || own.WindowsOrigin != "ImageUpdater ns/iu spec.applicationRefs[0].updateWindows" {
		t.Errorf("a ref's own windows: %q %v %s", own.Windows, own.UseSyncWindows, own.WindowsOrigin)
	}
	if spec.Windows.String() != "allow 0 9 * * * 1h0m0s" || !spec.UseSyncWindows || spec.WindowsOrigin != "ImageUpdater ns/iu spec.updateWindows" {
		t.Errorf("the spec's windows: %q %v %s", spec.Windows, spec.UseSyncWindows, spec.WindowsOrigin)
	}
	if !bad.WindowsInvalid || len(bad.Problems) != 1 || !strings.HasPrefix(bad.Problems[0].Error(), "ImageUpdater ns/iu spec.applicationRefs[2].updateWindows[1]: schedule") {
		t.Errorf("bad windows: %v %v", bad.WindowsInvalid, bad.Problems)
	}
}
