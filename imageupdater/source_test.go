package imageupdater

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
