package cycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/strategy"
)

func TestChoosePinned(t *testing.T) {
	d := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	// where each tag points now
	now := map[string]string{"1.0.0": d("a"), "1.1.0": d("b"), "stable": d("c")}
	errDown := errors.New("registry down")
	tests := []struct {
		name       string
		strategy   string
		mode       settings.DigestPin
		tags       []string
		current    imageref.Version
		down       bool
		want       imageref.Version
		wantUpdate bool
		wantAsked  int
		wantErr    error
	}{
		{name: "never: the tag alone", mode: settings.PinNever, tags: []string{"1.0.0", "1.1.0"}, current: imageref.Version{Tag: "1.0.0"},
			want: imageref.Version{Tag: "1.1.0"}, wantUpdate: true},
		{name: "a new tag pinned", mode: settings.PinIfNotPresent, tags: []string{"1.0.0", "1.1.0"}, current: imageref.Version{Tag: "1.0.0", Digest: d("a")},
			want: imageref.Version{Tag: "1.1.0", Digest: d("b")}, wantUpdate: true, wantAsked: 1},
		{name: "the running tag pinned a first time", mode: settings.PinIfNotPresent, tags: []string{"1.0.0"}, current: imageref.Version{Tag: "1.0.0"},
			want: imageref.Version{Tag: "1.0.0", Digest: d("a")}, wantUpdate: true, wantAsked: 1},
		{name: "if-not-present: a moved tag is not followed, nor asked", mode: settings.PinIfNotPresent, tags: []string{"1.0.0"}, current: imageref.Version{Tag: "1.0.0", Digest: d("9")},
			want: imageref.Version{Tag: "1.0.0", Digest: d("9")}},
		{name: "always: a moved tag is pinned again", mode: settings.PinAlways, tags: []string{"1.0.0"}, current: imageref.Version{Tag: "1.0.0", Digest: d("9")},
			want: imageref.Version{Tag: "1.0.0", Digest: d("a")}, wantUpdate: true, wantAsked: 1},
		{name: "always: a pin where the tag points stays", mode: settings.PinAlways, tags: []string{"1.0.0"}, current: imageref.Version{Tag: "1.0.0", Digest: d("a")},
			want: imageref.Version{Tag: "1.0.0", Digest: d("a")}, wantAsked: 1},
		{name: "a registry that cannot tell fails the choice", mode: settings.PinAlways, tags: []string{"1.0.0", "1.1.0"}, current: imageref.Version{Tag: "1.0.0"},
			down: true, wantErr: errDown, wantAsked: 1},
		{name: "the digest strategy pins on its own", strategy: "digest", mode: settings.PinIfNotPresent, tags: []string{"stable"}, current: imageref.Version{Tag: "stable", Digest: d("9")},
			want: imageref.Version{Tag: "stable", Digest: d("c")}, wantUpdate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := strategy.Settings{Strategy: tt.strategy}
			if tt.strategy == "digest" {
				s.Constraint = "stable"
			}
			policy, err := strategy.New(s)
			if err != nil {
				t.Fatal(err)
			}
			meta := func(_ context.Context, tag string) (strategy.TagInfo, error) {
				return strategy.TagInfo{Tag: tag, Digest: now[tag]}, nil
			}
			asked := 0
			pin := Pin{Mode: tt.mode, Digest: func(_ context.Context, tag string) (string, error) {
				asked++
				if tt.down {
					return "", errDown
				}
				return now[tag], nil
			}}
			res, _, err := Choose(t.Context(), policy, tt.tags, tt.current, meta, Choice{Pin: pin})
			if asked != tt.wantAsked {
				t.Errorf("asked the registry %d times, want %d", asked, tt.wantAsked)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "pinning tag 1.1.0 by digest") {
					t.Errorf("error %q does not name the tag pinned", err)
				}
				return
			}
			j := &job{policy: policy, spec: &settings.ImageSpec{PinDigest: tt.mode}}
			if got := j.newVersion(res); got != tt.want || res.Update != tt.wantUpdate {
				t.Errorf("version %s update=%v, want %s update=%v (%s)", got, res.Update, tt.want, tt.wantUpdate, res.Reason)
			}
		})
	}
}
