package imageupdater

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
)

// TestSpecificity: v1.3.0's order of applicationRefs selecting one
// Application: an exact name, then label selectors, then longer literals.
func TestSpecificity(t *testing.T) {
	sel := func(labels int) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := range labels {
			s.MatchLabels[string(rune('a'+i))] = "x"
		}
		return s
	}
	ordered := []api.ApplicationRef{
		{NamePattern: "app-prod"},
		{NamePattern: "*", LabelSelectors: sel(2)},
		{NamePattern: "*", LabelSelectors: sel(1)},
		{NamePattern: "app-prod-*"},
		{NamePattern: "app-[a-z]*"},
		{NamePattern: "*"},
	}
	for i := 1; i < len(ordered); i++ {
		if a, b := specificity(ordered[i-1]), specificity(ordered[i]); a <= b {
			t.Errorf("%+v (%d) should rank above %+v (%d)", ordered[i-1], a, ordered[i], b)
		}
	}
}

// TestParsedSettings: a resource's settings are read once per generation
// and reference options, so that a cycle compiles nothing of a resource
// that did not change; a resource no longer listed is forgotten.
func TestParsedSettings(t *testing.T) {
	updater := func(uid types.UID, generation int64, image string) *api.ImageUpdater {
		return &api.ImageUpdater{
			ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "iu", UID: uid, Generation: generation},
			Spec: api.ImageUpdaterSpec{ApplicationRefs: []api.ApplicationRef{
				{NamePattern: "a-*", Images: []api.ImageConfig{{Alias: "a", ImageName: image}}},
				{NamePattern: "b-*", Images: []api.ImageConfig{{Alias: "b", ImageName: "redis"}}},
			}},
		}
	}
	p := &parsedSettings{byUID: map[types.UID]*resourceSettings{}}
	first := p.of(updater("u1", 1, "nginx:~1"), 0, "", nil)
	for _, tt := range []struct {
		name    string
		iu      *api.ImageUpdater
		ref     int
		options string
		same    bool
	}{
		{name: "same generation", iu: updater("u1", 1, "nginx:~1"), same: true},
		{name: "another ref", iu: updater("u1", 1, "nginx:~1"), ref: 1},
		{name: "other reference options", iu: updater("u1", 1, "nginx:~1"), options: "docker.io\x00library"},
		{name: "new generation", iu: updater("u1", 2, "nginx:~2")},
		{name: "another resource", iu: updater("u2", 1, "nginx:~1")},
		{name: "not from the API server", iu: updater("", 0, "nginx:~1")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p.byUID = map[types.UID]*resourceSettings{}
			p.of(updater("u1", 1, "nginx:~1"), 0, "", nil)
			p.byUID["u1"].refs[0] = first
			got := p.of(tt.iu, tt.ref, tt.options, nil)
			if (got == first) != tt.same {
				t.Errorf("the settings read before: %v, want %v", got == first, tt.same)
			}
			if len(got.Images) != 1 || got.Images[0].Policy == nil {
				t.Errorf("settings %+v", got)
			}
		})
	}
	p.keep([]resource{{obj: updater("u2", 1, "nginx")}})
	if _, ok := p.byUID["u1"]; ok {
		t.Error("a resource no longer listed is kept")
	}
}
