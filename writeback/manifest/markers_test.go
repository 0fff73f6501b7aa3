package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

func TestSetMarkedImages(t *testing.T) {
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("ghcr.io/example/app")}, New: imageref.Version{Tag: "1.5.0"}}
	web := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("nginx")}, New: imageref.Version{Tag: "1.27", Digest: "sha256:" + strings.Repeat("a", 64)}}
	num := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "num", Image: mustRef("example.com/num")}, New: imageref.Version{Tag: "1.10"}}
	tests := []struct {
		name, src, want string
		changed         []string
		found           []string
		err             string
	}{
		{
			name: "whole reference, version, name; quotes and other lines kept",
			src: "spec:\n  containers:\n  - name: app\n    image: ghcr.io/example/app:1.4.0 # {\"$imageupdater\": \"app\"}\n" +
				"  - name: web\n    image: \"nginx:1.25\"  #{\"$imageupdater\":\"web\"} pinned\n" +
				"    env:\n    - name: APP_VERSION\n      value: '1.4.0' # {\"$imageupdater\": \"app:tag\"}\n" +
				"    args:\n    - ghcr.io/example/app # {\"$imageupdater\": \"app:name\"}\n",
			want: "spec:\n  containers:\n  - name: app\n    image: ghcr.io/example/app:1.5.0 # {\"$imageupdater\": \"app\"}\n" +
				"  - name: web\n    image: \"nginx:1.27@sha256:" + strings.Repeat("a", 64) + "\"  #{\"$imageupdater\":\"web\"} pinned\n" +
				"    env:\n    - name: APP_VERSION\n      value: '1.5.0' # {\"$imageupdater\": \"app:tag\"}\n" +
				"    args:\n    - ghcr.io/example/app # {\"$imageupdater\": \"app:name\"}\n",
			changed: []string{"app", "web"},
			found:   []string{"app", "web"},
		},
		{
			name:  "markers of other aliases and Windows line ends are left alone",
			src:   "image: busybox:1 # {\"$imageupdater\": \"other\"}\r\nimage: ghcr.io/example/app:1.5.0 # {\"$imageupdater\": \"app\"}\r\n",
			want:  "image: busybox:1 # {\"$imageupdater\": \"other\"}\r\nimage: ghcr.io/example/app:1.5.0 # {\"$imageupdater\": \"app\"}\r\n",
			found: []string{"app"},
		},
		{
			name:    "a version that would read as a number is quoted, unless it is already",
			src:     "env:\n- value: 1.9 # {\"$imageupdater\": \"num:tag\"}\n- value: '1.9' # {\"$imageupdater\": \"num:tag\"}\n",
			want:    "env:\n- value: \"1.10\" # {\"$imageupdater\": \"num:tag\"}\n- value: '1.10' # {\"$imageupdater\": \"num:tag\"}\n",
			changed: []string{"num"},
			found:   []string{"num"},
		},
		{name: "a marker after no value", src: "image: # {\"$imageupdater\": \"app\"}\n", err: "x.yaml:1: the marker comment follows no value"},
		{name: "a marker on a key", src: "# {\"$imageupdater\": \"app\"}\n", err: "x.yaml:1: the marker comment follows no value"},
		{
			name: "the digest marked apart: the tag alone beside it, nothing left of an earlier pin",
			src: "web:\n  tag: \"1.25\" # {\"$imageupdater\": \"web:tag\"}\n  digest: sha256:" + strings.Repeat("b", 64) + " # {\"$imageupdater\": \"web:digest\"}\n" +
				"app:\n  tag: 1.4.0 # {\"$imageupdater\": \"app:tag\"}\n  digest: sha256:" + strings.Repeat("b", 64) + " # {\"$imageupdater\": \"app:digest\"}\n" +
				"image: nginx:1.25 # {\"$imageupdater\": \"web\"}\n",
			want: "web:\n  tag: \"1.27\" # {\"$imageupdater\": \"web:tag\"}\n  digest: sha256:" + strings.Repeat("a", 64) + " # {\"$imageupdater\": \"web:digest\"}\n" +
				"app:\n  tag: 1.5.0 # {\"$imageupdater\": \"app:tag\"}\n  digest: \"\" # {\"$imageupdater\": \"app:digest\"}\n" +
				"image: nginx:1.27@sha256:" + strings.Repeat("a", 64) + " # {\"$imageupdater\": \"web\"}\n",
			changed: []string{"app", "web"},
			found:   []string{"app", "web"},
		},
		{name: "an unknown part", src: "image: a # {\"$imageupdater\": \"app:size\"}\n", err: `x.yaml:1: marker "app:size": want "app", "app:tag", "app:name" or "app:digest"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, found, changed, err := SetMarkedImages("x.yaml", []byte(tt.src), []writeback.ImageUpdate{app, web, num})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", out, tt.want)
			}
			var gotChanged, gotFound []string
			for _, c := range changed {
				gotChanged = append(gotChanged, c.Alias)
			}
			for _, a := range []string{"app", "web", "num"} {
				if found[a] {
					gotFound = append(gotFound, a)
				}
			}
			if strings.Join(gotChanged, ",") != strings.Join(tt.changed, ",") || strings.Join(gotFound, ",") != strings.Join(tt.found, ",") {
				t.Errorf("changed %v found %v, want %v %v", gotChanged, gotFound, tt.changed, tt.found)
			}
		})
	}
}

func FuzzSetMarkedImages(f *testing.F) {
	f.Add([]byte("image: ghcr.io/example/app:1.4.0 # {\"$imageupdater\": \"app\"}\n"))
	f.Add([]byte("- x # {\"$imageupdater\": \"app:tag\"}\n- # {\"$imageupdater\": \"app\"}"))
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("ghcr.io/example/app")}, New: imageref.Version{Tag: "1.5.0"}}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, _, changed, err := SetMarkedImages("x.yaml", src, []writeback.ImageUpdate{app})
		if err != nil {
			return
		}
		if len(changed) == 0 && string(out) != string(src) {
			t.Fatalf("unchanged file rewritten:\n%q\n%q", src, out)
		}
		if strings.Count(string(out), "\n") != strings.Count(string(src), "\n") {
			t.Fatalf("line count changed:\n%q\n%q", src, out)
		}
	})
}

// The markers of an app-of-apps parent's files name the child, in the
// parent's destination namespace or in another, and an image or a chart
// of it; everything but the values they mark stays as it is.
func TestSetApplicationMarkers(t *testing.T) {
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("ghcr.io/example/app")}, New: imageref.Version{Tag: "1.10"}}
	web := writeback.ChartUpdate{ChartSpec: settings.ChartSpec{Alias: "web", Chart: "web"}, Old: "1.0.0", New: "1.1.0"}
	num := writeback.ChartUpdate{ChartSpec: settings.ChartSpec{Alias: "num", Chart: "num"}, Old: "1.0", New: "1.10"}
	unnamed := writeback.ChartUpdate{ChartSpec: settings.ChartSpec{Chart: "unnamed"}, New: "2.0.0"}
	child := ApplicationDefinition{Namespace: "argocd", Name: "child", DefaultNamespace: "argocd", Source: -1}
	elsewhere := ApplicationDefinition{Namespace: "team-a", Name: "child", DefaultNamespace: "argocd", Source: -1}
	values := "# the platform's applications\napps:\n  child:\n" +
		"    version: 1.0.0 # {\"$imageupdater\": \"child/web\"} the chart\n" +
		"    image: 'ghcr.io/example/app:1.9' # {\"$imageupdater\": \"child/app\"}\n" +
		"    tag: \"1.9\" #{\"$imageupdater\":\"child/app:tag\"}\n" +
		"    short: 1.9 # {\"$imageupdater\": \"child/app:tag\"}\n" +
		"    repo: ghcr.io/example/old # {\"$imageupdater\": \"child/app:name\"}\n" +
		"  other:\n    version: 1.0.0 # {\"$imageupdater\": \"other/web\"}\n" +
		"  plain:\n    image: busybox:1 # {\"$imageupdater\": \"app\"}\n" +
		"  ns:\n    version: 1.0.0 # {\"$imageupdater\": \"team-a/child/web\"}\n" +
		"    numbers:\n    - 1.0 # {\"$imageupdater\": \"child/num\"}\n" +
		"{{- /* not YAML, kept */}}\r\n"
	tests := []struct {
		name          string
		def           ApplicationDefinition
		src, want     string
		images        []string
		charts        []string
		changedImages []string
		changedCharts []string
		err           string
	}{
		{
			name: "the child in the parent's destination namespace",
			def:  child, src: values,
			want: "# the platform's applications\napps:\n  child:\n" +
				"    version: 1.1.0 # {\"$imageupdater\": \"child/web\"} the chart\n" +
				"    image: 'ghcr.io/example/app:1.10' # {\"$imageupdater\": \"child/app\"}\n" +
				"    tag: \"1.10\" #{\"$imageupdater\":\"child/app:tag\"}\n" +
				"    short: \"1.10\" # {\"$imageupdater\": \"child/app:tag\"}\n" +
				"    repo: ghcr.io/example/app # {\"$imageupdater\": \"child/app:name\"}\n" +
				"  other:\n    version: 1.0.0 # {\"$imageupdater\": \"other/web\"}\n" +
				"  plain:\n    image: busybox:1 # {\"$imageupdater\": \"app\"}\n" +
				"  ns:\n    version: 1.0.0 # {\"$imageupdater\": \"team-a/child/web\"}\n" +
				"    numbers:\n    - \"1.10\" # {\"$imageupdater\": \"child/num\"}\n" +
				"{{- /* not YAML, kept */}}\r\n",
			images: []string{"app"}, charts: []string{"num", "web"},
			changedImages: []string{"app"}, changedCharts: []string{"web", "num"},
		},
		{
			name: "the child in another namespace",
			def:  elsewhere, src: values,
			want:   strings.Replace(values, "1.0.0 # {\"$imageupdater\": \"team-a/child/web\"}", "1.1.0 # {\"$imageupdater\": \"team-a/child/web\"}", 1),
			charts: []string{"web"}, changedCharts: []string{"web"},
		},
		{
			name: "the marker names the child's namespace, which is the default one",
			def:  child, src: "v: 1.0.0 # {\"$imageupdater\": \"argocd/child/web\"}\n",
			want:   "v: 1.1.0 # {\"$imageupdater\": \"argocd/child/web\"}\n",
			charts: []string{"web"}, changedCharts: []string{"web"},
		},
		{
			name: "where the namespace a child is created in is not known, only markers naming it",
			def:  ApplicationDefinition{Namespace: "argocd", Name: "child", Source: -1}, src: "a: 1.0.0 # {\"$imageupdater\": \"child/web\"}\nb: 1.0.0 # {\"$imageupdater\": \"argocd/child/web\"}\n",
			want:   "a: 1.0.0 # {\"$imageupdater\": \"child/web\"}\nb: 1.1.0 # {\"$imageupdater\": \"argocd/child/web\"}\n",
			charts: []string{"web"}, changedCharts: []string{"web"},
		},
		{
			name: "already written",
			def:  child, src: "v: \"1.1.0\" # {\"$imageupdater\": \"child/web\"}\n",
			want:   "v: \"1.1.0\" # {\"$imageupdater\": \"child/web\"}\n",
			charts: []string{"web"},
		},
		{
			name: "unknown aliases, a chart without alias, more parts",
			def:  child, src: "a: 1 # {\"$imageupdater\": \"child/unnamed\"}\nb: 1 # {\"$imageupdater\": \"x/argocd/child/web\"}\nc: 1 # {\"$imageupdater\": \"child/\"}\n",
			want: "a: 1 # {\"$imageupdater\": \"child/unnamed\"}\nb: 1 # {\"$imageupdater\": \"x/argocd/child/web\"}\nc: 1 # {\"$imageupdater\": \"child/\"}\n",
		},
		{name: "a chart's tag", def: child, src: "x: 1\nv: 1.0.0 # {\"$imageupdater\": \"child/web:tag\"}\n", err: `p.yaml:2: marker "child/web:tag": web is a chart, whose version is written whole: want "child/web"`},
		{name: "a chart's name", def: elsewhere, src: "v: web # {\"$imageupdater\": \"team-a/child/web:name\"}\n", err: `p.yaml:1: marker "team-a/child/web:name": web is a chart`},
		{name: "an image's unknown part", def: child, src: "\n\nv: a # {\"$imageupdater\": \"child/app:size\"}\n", err: `p.yaml:3: marker "child/app:size": want "child/app", "child/app:tag", "child/app:name" or "child/app:digest"`},
		{name: "a marker after no value", def: child, src: "version: # {\"$imageupdater\": \"child/web\"}\n", err: "p.yaml:1: the marker comment follows no value"},
		{name: "another Application's bad marker is not read", def: child, src: "version: # {\"$imageupdater\": \"other/web:tag\"}\n", want: "version: # {\"$imageupdater\": \"other/web:tag\"}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, mc, err := SetApplicationMarkers("p.yaml", []byte(tt.src), tt.def, []writeback.ImageUpdate{app}, []writeback.ChartUpdate{web, num, unnamed})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", out, tt.want)
			}
			var changedImages, changedCharts []string
			for _, c := range mc.ChangedImages {
				changedImages = append(changedImages, c.Alias)
			}
			for _, c := range mc.ChangedCharts {
				changedCharts = append(changedCharts, c.Alias)
			}
			got := fmt.Sprint(slices.Sorted(maps.Keys(mc.Images)), slices.Sorted(maps.Keys(mc.Charts)), changedImages, changedCharts)
			if want := fmt.Sprint(tt.images, tt.charts, tt.changedImages, tt.changedCharts); got != want {
				t.Errorf("found images, charts; changed images, charts: %s, want %s", got, want)
			}
		})
	}
}

func FuzzSetApplicationMarkers(f *testing.F) {
	f.Add([]byte("v: 1.0.0 # {\"$imageupdater\": \"child/web\"}\n"))
	f.Add([]byte("- x # {\"$imageupdater\": \"ns/child/app:tag\"}\n- # {\"$imageupdater\": \"child/app\"}"))
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("ghcr.io/example/app")}, New: imageref.Version{Tag: "1.5"}}
	web := writeback.ChartUpdate{ChartSpec: settings.ChartSpec{Alias: "web", Chart: "web"}, New: "1.10"}
	def := ApplicationDefinition{Namespace: "ns", Name: "child", DefaultNamespace: "ns", Source: -1}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, mc, err := SetApplicationMarkers("x.yaml", src, def, []writeback.ImageUpdate{app}, []writeback.ChartUpdate{web})
		if err != nil {
			return
		}
		if len(mc.ChangedImages)+len(mc.ChangedCharts) == 0 && string(out) != string(src) {
			t.Fatalf("unchanged file rewritten:\n%q\n%q", src, out)
		}
		if strings.Count(string(out), "\n") != strings.Count(string(src), "\n") {
			t.Fatalf("line count changed:\n%q\n%q", src, out)
		}
	})
}
