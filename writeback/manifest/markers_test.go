package manifest

import (
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

func TestSetMarkedImages(t *testing.T) {
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef("ghcr.io/example/app")}, New: imageref.Version{Tag: "1.5.0"}}
	web := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef("nginx")}, New: imageref.Version{Tag: "1.27", Digest: "sha256:" + strings.Repeat("a", 64)}}
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
		{name: "a marker after no value", src: "image: # {\"$imageupdater\": \"app\"}\n", err: "x.yaml:1: the marker comment follows no value"},
		{name: "a marker on a key", src: "# {\"$imageupdater\": \"app\"}\n", err: "x.yaml:1: the marker comment follows no value"},
		{name: "an unknown part", src: "image: a # {\"$imageupdater\": \"app:digest\"}\n", err: `x.yaml:1: marker "app:digest": want "app", "app:tag" or "app:name"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, found, changed, err := SetMarkedImages("x.yaml", []byte(tt.src), []writeback.ImageUpdate{app, web})
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
			for _, a := range []string{"app", "web"} {
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
