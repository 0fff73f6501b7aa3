package strategy_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// FuzzNew feeds arbitrary settings to New. It must never panic, every error
// must be a *SettingError, and a valid policy must be able to choose.
func FuzzNew(f *testing.F) {
	seeds := []struct{ strategy, constraint, allow, ignore string }{
		{"", "", "", ""},
		{"semver", "~1.26", "regexp:^v?\\d+\\.\\d+\\.\\d+$", "*-rc*,latest"},
		{"semver", "^2", "any", ""},
		{"semver", ">=1.2 <2", "", "*"},
		{"semver", "1.x || >=3.0.0-0", "regexp:^(1|2)\\.", "1.2.*"},
		{"semver", "1.2 - 1.4.5", "", "[0-9]*"},
		{"semver", "~>>1", "regexp:(", "bad["},
		{"latest", "", "regexp:^main-[0-9a-f]{7}$", "main-broken*"},
		{"newest-build", "", "regex:x", ""},
		{"digest", "latest", "", ""},
		{"digest", "", "", ""},
		{"digest", "~1.2", "", ""},
		{"name", "", "regexp:^\\d{4}-\\d{2}-\\d{2}$", "\\"},
		{"alphabetical", "[", "any", "a,,b, c"},
		{"unknown", "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.strategy, s.constraint, s.allow, s.ignore)
	}
	tags := []string{"1.0.0", "v1.2.0", "1.2", "2.0.0-rc.1", "latest", "main-abc1234", "2024-01-02", sigTag}
	meta := func(ctx context.Context, tag string) (strategy.TagInfo, error) {
		return strategy.TagInfo{Tag: tag, Digest: digestOf(tag[0]), Created: at(len(tag))}, nil
	}
	f.Fuzz(func(t *testing.T, name, constraint, allow, ignore string) {
		p, err := strategy.New(strategy.Settings{
			Strategy:   name,
			Constraint: constraint,
			AllowTags:  allow,
			IgnoreTags: strings.Split(ignore, ";"),
		})
		if err != nil {
			var se *strategy.SettingError
			if !errors.As(err, &se) || se.Field == "" || se.Err == nil {
				t.Fatalf("New error %v (%T) is not a complete *SettingError", err, err)
			}
			return
		}
		r, err := p.Choose(context.Background(), tags, imageref.Version{Tag: "1.0.0"}, meta)
		if err != nil {
			t.Fatalf("Choose on a valid policy %v: %v", p, err)
		}
		if !r.Update && r.Reason == "" {
			t.Fatalf("no update without a reason: %+v", r)
		}
		if r.Update && !slices.Contains(tags, r.Tag) {
			t.Fatalf("chose %q, which was not offered", r.Tag)
		}
	})
}

// FuzzSemVerOrder checks that a semver choice does not depend on the order of
// the tag list, and that choosing again from the result changes nothing.
func FuzzSemVerOrder(f *testing.F) {
	f.Add("1.2,1.2.0,v1.2.0,1.1.0", "")
	f.Add("1.2.3+b,1.2.3+a,v1.2.3,latest", "")
	f.Add("1.0.0-rc.1,v1.0.0-rc.1,1.0.0-rc.1+x,0.9", ">=1.0.0-0")
	f.Add("v2,2.0,2.0.0,2.0.0+0,1.9.9", "^2")
	f.Fuzz(func(t *testing.T, list, constraint string) {
		p, err := strategy.New(strategy.Settings{Constraint: constraint})
		if err != nil {
			return
		}
		tags := strings.Split(list, ",")
		reversed := slices.Clone(tags)
		slices.Reverse(reversed)
		a, _ := p.Choose(context.Background(), tags, imageref.Version{}, nil)
		b, _ := p.Choose(context.Background(), reversed, imageref.Version{}, nil)
		if a.Tag != b.Tag {
			t.Fatalf("order changes the choice: %q vs %q", a.Tag, b.Tag)
		}
		if a.Tag == "" {
			return
		}
		again, _ := p.Choose(context.Background(), tags, imageref.Version{Tag: a.Tag}, nil)
		if again.Update {
			t.Fatalf("chose %q, then %q", a.Tag, again.Tag)
		}
	})
}
