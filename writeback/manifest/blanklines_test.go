package manifest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// A values file that must be re-encoded (a key added to a flow map, a
// value with a tag of its own) keeps its blank lines, as v1.3 keeps them
// (#1702, #1734); those inside a value stay the value's.
func TestReencodeKeepsBlankLines(t *testing.T) {
	tests := []struct {
		name, src, param, want string
	}{
		{
			name: "sections and nested groups",
			src: "# Values of the app\n# over two lines\n\n# Global settings\nglobal:\n  environment: production\n  debug: false\n\n" +
				"images:\n  # the app\n  app: {repository: myapp}\n\n  # the sidecar\n  sidecar:\n    tag: v1.0.0\n\n" +
				"database:\n  host: localhost\n\n  pool:\n    minSize: 5\n",
			param: "images.app.tag",
			want: "# Values of the app\n# over two lines\n\n# Global settings\nglobal:\n  environment: production\n  debug: false\n\n" +
				"images:\n  # the app\n  app: {repository: myapp, tag: v2.0.0}\n\n  # the sidecar\n  sidecar:\n    tag: v1.0.0\n\n" +
				"database:\n  host: localhost\n\n  pool:\n    minSize: 5\n",
		},
		{
			name:  "a block scalar's own blank lines, and one after it",
			src:   "config:\n  motd: |\n    Welcome.\n\n    Please log in.\n\n  image:\n    tag: !!str v1.0.0\n",
			param: "config.image.tag",
			want:  "config:\n  motd: |\n    Welcome.\n\n    Please log in.\n\n  image:\n    tag: v2.0.0\n",
		},
		{
			name:  "a block scalar that keeps its final blank lines",
			src:   "motd: |+\n  Welcome.\n\nimage:\n  tag: !!str v1.0.0\n",
			param: "image.tag",
			want:  "motd: |+\n  Welcome.\n\nimage:\n  tag: v2.0.0\n",
		},
		{
			name:  "a plain scalar over lines",
			src:   "note: first\n  second\n\n  third\n\nimage: {repository: a}\n",
			param: "image.tag",
			want:  "note: |-\n  first second\n  third\n\nimage: {repository: a, tag: v2.0.0}\n",
		},
		{
			name:  "list entries",
			src:   "images:\n- name: a\n\n- name: b\n\nimage: {repository: a}\n",
			param: "image.tag",
			want:  "images:\n- name: a\n\n- name: b\n\nimage: {repository: a, tag: v2.0.0}\n",
		},
		{
			name:  "CRLF line ends",
			src:   "global:\r\n  debug: false\r\n\r\nimage: {repository: a}\r\n",
			param: "image.tag",
			want:  "global:\n  debug: false\n\nimage: {repository: a, tag: v2.0.0}\n",
		},
		{
			name:  "the marker's text in the file",
			src:   "a: 1\n\n# " + blankLineMarker + "\nimage: {repository: a}\n",
			param: "image.tag",
			want:  "a: 1\n\n# " + blankLineMarker + "\nimage: {repository: a, tag: v2.0.0}\n",
		},
		{
			name:  "a document start and the blank lines after it",
			src:   "---\n\nimage: {repository: a}\n\nother: 1\n",
			param: "image.tag",
			want:  "---\n\nimage: {repository: a, tag: v2.0.0}\n\nother: 1\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := setHelmValue("values.yaml", []byte(tt.src), helmParameter{name: tt.param, value: "v2.0.0"})
			if err != nil || !changed {
				t.Fatalf("changed %v, error %v", changed, err)
			}
			if diff := cmp.Diff(tt.want, string(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Whatever the file, a re-encoding through the markers means what the
// file means, and marks nothing when nothing can be marked safely.
func FuzzMarkBlankLines(f *testing.F) {
	for _, s := range []string{
		"a: 1\n\nb:\n  c: |\n    x\n\n    y\n\n  d: 2\n",
		"l:\n- a\n\n- b: |+\n    x\n\n\nz: [1,\n\n 2]\n",
		"k: 'a\n\n  b'\n\nm: \"c\n\n  d\"\n",
		"? |\n  key\n\n: v\n\n",
		"\n\n# c\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		want, err := decodeAny("values.yaml", []byte(src))
		if err != nil || len(src) > 4096 {
			return
		}
		marked, unmark := markBlankLines("values.yaml", []byte(src))
		var doc yaml.Node
		if err := yaml.Unmarshal(marked, &doc); err != nil {
			t.Fatalf("the marked text does not parse: %v\n%q", err, marked)
		}
		out, err := marshalCompact(&doc)
		if err != nil {
			return // the encoder's own limits
		}
		got, err := decodeAny("values.yaml", unmark(out))
		if err != nil {
			t.Fatalf("the re-encoded text does not parse: %v\n%q", err, unmark(out))
		}
		plain, _ := decodeAny("values.yaml", out)
		if !reflect.DeepEqual(normalizeYAMLValue(got), normalizeYAMLValue(plain)) {
			t.Fatalf("turning the markers back changed the meaning:\n%q\n%q", out, unmark(out))
		}
		if !reflect.DeepEqual(normalizeYAMLValue(want), normalizeYAMLValue(got)) && strings.Contains(string(marked), blankLineMarker) {
			// The encoder alone may change a meaning (yaml.v3's own
			// round trip); the markers must not.
			var plainDoc yaml.Node
			_ = yaml.Unmarshal([]byte(src), &plainDoc)
			ref, err := marshalCompact(&plainDoc)
			if err != nil {
				return
			}
			if refMeaning, _ := decodeAny("values.yaml", ref); reflect.DeepEqual(normalizeYAMLValue(refMeaning), normalizeYAMLValue(want)) {
				t.Fatalf("the markers changed the meaning:\n%q\n%q", src, unmark(out))
			}
		}
	})
}
