package settings

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
)

func TestStage(t *testing.T) {
	a := ParseAnnotations(ann("image-list", "web=nginx,api=nginx", "promote-from", "staging", "web.promote-from", "team-a/shop-staging", "web.promote-soak", "2d"))
	if len(a.Problems) > 0 || len(a.Images) != 2 {
		t.Fatalf("problems %v", a.Problems)
	}
	want := map[string]Stage{
		"web": {Namespace: "team-a", Name: "shop-staging", Soak: 48 * time.Hour, Origin: AnnotationOrigin("web.promote-from")},
		"api": {Name: "staging", Origin: AnnotationOrigin("promote-from")},
	}
	for _, s := range a.Images {
		if s.PromoteFrom != want[s.Alias] {
			t.Errorf("%s: stage %+v, want %+v", s.Alias, s.PromoteFrom, want[s.Alias])
		}
	}
	for _, bad := range [][]string{{"web.promote-from", "a/b/c"}, {"web.promote-from", "/"}, {"web.promote-soak", "forever"}, {"web.promote-soak", "31d"}} {
		kv := []string{"image-list", "web=nginx", "web.promote-from", "staging"}
		kv = append(kv, bad...)
		a := ParseAnnotations(ann(kv...))
		if len(a.Images) != 0 || len(a.Problems) != 1 || !strings.HasPrefix(a.Problems[0].Error(), "annotation "+AnnotationPrefix+"web.promote-from (image web): ") {
			t.Errorf("%q: images %d, problems %v", bad, len(a.Images), a.Problems)
		}
	}
	iu := &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"}, Spec: api.ImageUpdaterSpec{
		ApplicationRefs: []api.ApplicationRef{{NamePattern: "prod-*", Images: []api.ImageConfig{{Alias: "web", ImageName: "nginx",
			CommonUpdateSettings: &api.CommonUpdateSettings{PromoteFrom: &api.PromoteFrom{Application: "staging", SoakTime: "1h"}}}}}},
	}}
	r := ParseImageUpdater(iu, 0)
	if len(r.Problems) > 0 || r.Images[0].PromoteFrom != (Stage{Name: "staging", Soak: time.Hour, Origin: "ImageUpdater ns/iu spec.applicationRefs[0].images[0].commonUpdateSettings.promoteFrom"}) {
		t.Errorf("from the resource: %+v %v", r.Images, r.Problems)
	}
}
