package manifest

import (
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/writeback/appset"
)

func TestSetValues(t *testing.T) {
	set := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: teams}\n---\n# teams\napiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: teams\n  namespace: argocd\nspec:\n  generators:\n  - list:\n      elements:\n      - {name: web, tag: \"v1\"} # web\n      - name: api\n        tag: v1 # api\n"
	elem := func(i int, from, to string) appset.Value {
		return appset.Value{Path: append(appset.Keys("spec", "generators"), appset.Step{Index: 0}, appset.Step{Key: "list"}, appset.Step{Key: "elements"}, appset.Step{Index: i}, appset.Step{Key: "tag"}), From: from, To: to}
	}
	doc := Document{Kind: "ApplicationSet", Namespace: "argocd", Name: "teams"}
	for _, tc := range []struct {
		name   string
		src    string
		doc    Document
		values []appset.Value
		want   string
		err    string
	}{
		{name: "list elements, flow and block", src: set, doc: doc, values: []appset.Value{elem(0, "v1", "v2"), elem(1, "v1", "v3")},
			want: strings.Replace(strings.Replace(set, `tag: "v1"}`, `tag: "v2"}`, 1), "tag: v1 # api", "tag: v3 # api", 1)},
		{name: "json file", src: "{\n  \"image\": {\"tag\": \"v1\"},\n  \"n\": 1\n}\n", values: []appset.Value{{Path: appset.Keys("image", "tag"), From: "v1", To: "v1.1"}},
			want: "{\n  \"image\": {\"tag\": \"v1.1\"},\n  \"n\": 1\n}\n"},
		{name: "not the value planned on", src: set, doc: doc, values: []appset.Value{elem(1, "v0", "v2")}, err: `is "v1", not "v0"`},
		{name: "another namespace's", src: set, doc: Document{Kind: "ApplicationSet", Namespace: "team-b", Name: "teams"}, values: []appset.Value{elem(0, "v1", "v2")}, err: "no document"},
		{name: "no such path", src: set, doc: doc, values: []appset.Value{elem(2, "v1", "v2")}, err: "no spec.generators[0].list.elements[2]"},
		{name: "a file of two documents for a generator", src: set, values: []appset.Value{elem(0, "v1", "v2")}, err: "2 documents"},
		{name: "a block scalar", src: "tag: |\n  v1\n", values: []appset.Value{{Path: appset.Keys("tag"), From: "v1\n", To: "v2"}}, err: "in place"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetValues("f.yaml", []byte(tc.src), tc.doc, tc.values)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %v\n%s\nwant\n%s", err, got, tc.want)
			}
		})
	}
}
