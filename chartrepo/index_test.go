package chartrepo

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// helmIndex is an index as `helm repo index` writes it.
const helmIndex = `apiVersion: v1
entries:
  podinfo:
  - annotations:
      artifacthub.io/changes: |
        - version: 9.9.9
    apiVersion: v2
    appVersion: 6.5.1
    created: "2023-11-06T10:00:00Z"
    dependencies:
    - name: redis
      version: 17.0.0
    description: |-
      Podinfo is a tiny web application
      version: 8.8.8
    digest: 0a1b
    maintainers:
    - email: a@example.com
      name: stefanprodan
    name: podinfo
    urls:
    - https://example.com/podinfo-6.5.1.tgz
    version: 6.5.1
  - apiVersion: v2
    name: podinfo
    version: "6.5.0"
  redis:
  - version: 18.0.1
    name: redis
  - name: redis
    version: '18.0.0' # comment
  empty: []
generated: "2023-11-06T10:00:00Z"
`

func TestParseIndex(t *testing.T) {
	tests := []struct {
		name, index string
		want        map[string][]string
		wantErr     string
	}{
		{name: "helm's block YAML", index: helmIndex, want: map[string][]string{
			"podinfo": {"6.5.1", "6.5.0"}, "redis": {"18.0.1", "18.0.0"}, "empty": nil,
		}},
		{name: "indented sequences", index: "entries:\n    app:\n        -   name: app\n            version: 1.0.0\n        -   version: 1.1.0\n", want: map[string][]string{"app": {"1.0.0", "1.1.0"}}},
		{name: "items whose keys follow the dash's line", index: "entries:\n  app:\n  -\n    version: 2.0.0\n", want: map[string][]string{"app": {"2.0.0"}}},
		{name: "JSON", index: `{"apiVersion":"v1","entries":{"app":[{"name":"app","dependencies":[{"version":"9"}],"version":"1.2.3"},{"version":"1.3.0"}],"db":[]},"generated":"x"}`,
			want: map[string][]string{"app": {"1.2.3", "1.3.0"}, "db": nil}},
		{name: "no entries", index: "apiVersion: v1\n", wantErr: "no entries"},
		{name: "empty entries", index: "apiVersion: v1\nentries: {}\n", want: map[string][]string{}},
		{name: "empty", index: " \n", wantErr: "empty"},
		{name: "flow entries", index: "entries: {app: [{version: 1}]}\n", wantErr: "not a block mapping"},
		{name: "flow chart", index: "entries:\n  app: [{version: 1}]\n", wantErr: "not a block sequence"},
		{name: "alias as a version", index: "entries:\n  app:\n  - version: *v\n", wantErr: "written with '*'"},
		{name: "a mapping where entries are", index: "entries:\n  app:\n    version: 1\n", wantErr: "not a block sequence"},
		{name: "JSON with a version that is no string", index: `{"entries":{"app":[{"version":1}]}}`, wantErr: "expected a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix, err := ParseIndex(strings.NewReader(tt.index))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(ix.Charts) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", ix.Charts, tt.want)
			}
		})
	}
}

// indexOf writes charts as `helm repo index` does: through sigs.k8s.io/yaml.
func indexOf(t testing.TB, charts map[string][]map[string]any) []byte {
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "entries": charts, "generated": "now"})
	if err != nil {
		t.Skip("not an index Helm can write:", err)
	}
	return b
}

// plain are the names and versions the reader must read, in whatever
// context they are written.
var plain = regexp.MustCompile(`^[A-Za-z0-9._+-]*$`)

// FuzzParseIndex: what the stream reads of an index Helm's own encoder
// wrote is what the index holds, whatever its descriptions and nested
// values; and no input makes it fail otherwise than with an error.
func FuzzParseIndex(f *testing.F) {
	f.Add("podinfo", "6.5.1", "a\nversion: 9\n  - x", "1.0.0", true)
	f.Add("a b", "'1'", "|\n  x", "\"2\"", false)
	f.Add("entries", "v1.2.3+build", "#", ": x", true)
	f.Fuzz(func(t *testing.T, chart, v1, description, depVersion string, nested bool) {
		entry := map[string]any{"name": chart, "version": v1, "description": description}
		if nested {
			entry["dependencies"] = []any{map[string]any{"name": "x", "version": depVersion}}
			entry["annotations"] = map[string]any{"version": depVersion, description: v1}
		}
		second := map[string]any{"version": depVersion, "apiVersion": "v2"}
		doc := indexOf(t, map[string][]map[string]any{chart: {entry, second}, "other": {{"version": "0.1.0"}}})
		ix, err := ParseIndex(strings.NewReader(string(doc)))
		if err != nil {
			// Names and versions in odd forms (complex keys, block
			// scalars) may be refused, never misread; plain ones are read.
			if plain.MatchString(chart) && plain.MatchString(v1) && plain.MatchString(depVersion) {
				t.Fatalf("%v\n%s", err, doc)
			}
			return
		}
		// What Helm's own reader (a full parse) reads is the truth.
		var full struct {
			Entries map[string][]map[string]any
		}
		if err := yaml.Unmarshal(doc, &full); err != nil {
			t.Fatal(err)
		}
		for name, entries := range full.Entries {
			var want []string
			for _, e := range entries {
				if v, ok := e["version"].(string); ok && v != "" && len(v) <= maxVersionLen {
					want = append(want, v)
				}
			}
			if got := ix.Charts[name]; !slices.Equal(got, want) {
				t.Fatalf("chart %q: versions %q, want %q\n%s", name, got, want, doc)
			}
		}
		if len(ix.Charts) != len(full.Entries) {
			t.Fatalf("charts %q, want %d", ix.Charts, len(full.Entries))
		}
	})
}

// FuzzParseIndexAny: no input panics or reads unbounded; read for some
// charts alone, an index gives those charts of the whole, and counts as
// it reads exactly the bytes it then holds.
func FuzzParseIndexAny(f *testing.F) {
	f.Add(helmIndex)
	f.Add(`{"entries":{"a":[{"version":"1"}]}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		ix, err := ParseIndex(strings.NewReader(doc))
		if err != nil {
			return
		}
		n := 0
		for _, vs := range ix.Charts {
			n += len(vs) + 1
		}
		if n > MaxVersions {
			t.Fatalf("%d versions", n)
		}
		want := map[string]bool{"a": true, "podinfo": true}
		for name := range ix.Charts {
			want[name] = len(name)%2 == 0
		}
		var counted int64
		c := &collector{want: want, take: func(n int64) error { counted += n; return nil }}
		some, err := parseIndex(strings.NewReader(doc), c)
		if err != nil {
			t.Fatalf("read for some charts: %v", err)
		}
		for name, vs := range ix.Charts {
			if got, ok := some.Charts[name]; ok != want[name] || ok && !slices.Equal(got, vs) {
				t.Fatalf("chart %q: %q (kept %v), want %q (asked %v)", name, got, ok, vs, want[name])
			}
		}
		if len(some.Charts) > len(ix.Charts) || counted != some.Bytes() || c.bytes != counted {
			t.Fatalf("%d charts of %d; %d bytes counted, %d held", len(some.Charts), len(ix.Charts), counted, some.Bytes())
		}
	})
}

func TestParseIndexBounds(t *testing.T) {
	t.Run("versions", func(t *testing.T) {
		r := io.MultiReader(strings.NewReader("entries:\n  app:\n"), &repeat{line: "  - version: 1.0.0\n", n: MaxVersions + 1})
		if _, err := ParseIndex(r); !errors.Is(err, ErrTooManyVersions) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("a long line is skipped, not kept", func(t *testing.T) {
		r := io.MultiReader(strings.NewReader("entries:\n  app:\n  - description: "), &repeat{line: "x", n: 10 << 20}, strings.NewReader("\n    version: 1.0.0\n"))
		ix, err := ParseIndex(r)
		if err != nil || !slices.Equal(ix.Versions("app"), []string{"1.0.0"}) {
			t.Fatalf("%v %v", ix.Charts, err)
		}
	})
}

// repeat reads line n times.
type repeat struct {
	line string
	n    int
	off  int
}

func (r *repeat) Read(p []byte) (int, error) {
	w := 0
	for w < len(p) {
		if r.n == 0 {
			if w == 0 {
				return 0, io.EOF
			}
			return w, nil
		}
		c := copy(p[w:], r.line[r.off:])
		w += c
		r.off += c
		if r.off == len(r.line) {
			r.off = 0
			r.n--
		}
	}
	return w, nil
}
