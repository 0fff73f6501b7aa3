package strategy_test

import (
	"errors"
	"runtime"
	"strconv"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/image-updater/argocd-image-updater/strategy"
	"github.com/image-updater/argocd-image-updater/test/poll"
)

func TestSharedPolicies(t *testing.T) {
	base := strategy.Settings{Strategy: "semver", Constraint: "^1", AllowTags: "regexp:^v", IgnoreTags: []string{"*-rc*"}}
	amd64 := []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	for _, tt := range []struct {
		name  string
		other strategy.Settings
		same  bool
	}{
		{"equal settings", base, true},
		{"strategy spelled otherwise, space around values", strategy.Settings{Strategy: " SemVer", Constraint: "^1 ", AllowTags: " regexp:^v", IgnoreTags: []string{"*-rc*"}}, true},
		{"another strategy", strategy.Settings{Strategy: "alphabetical", Constraint: "^1", AllowTags: "regexp:^v", IgnoreTags: []string{"*-rc*"}}, false},
		{"another constraint", strategy.Settings{Strategy: "semver", Constraint: "^2", AllowTags: "regexp:^v", IgnoreTags: []string{"*-rc*"}}, false},
		{"another expression", strategy.Settings{Strategy: "semver", Constraint: "^1", AllowTags: "regexp:^w", IgnoreTags: []string{"*-rc*"}}, false},
		{"another glob", strategy.Settings{Strategy: "semver", Constraint: "^1", AllowTags: "regexp:^v", IgnoreTags: []string{"*-beta*"}}, false},
		{"globs split otherwise", strategy.Settings{Strategy: "semver", Constraint: "^1", AllowTags: "regexp:^v", IgnoreTags: []string{"*-rc", "*"}}, false},
		{"platforms", strategy.Settings{Strategy: "semver", Constraint: "^1", AllowTags: "regexp:^v", IgnoreTags: []string{"*-rc*"}, Platforms: amd64}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := strategy.Shared(base)
			if err != nil {
				t.Fatal(err)
			}
			q, err := strategy.Shared(tt.other)
			if err != nil {
				t.Fatal(err)
			}
			if (p == q) != tt.same {
				t.Errorf("the same policy for %s and %s: %v, want %v", p, q, p == q, tt.same)
			}
			if p.String() != mustNew(t, base).String() || q.String() != mustNew(t, tt.other).String() {
				t.Errorf("shared policies %s, %s differ from New's", p, q)
			}
		})
	}
}

// Bad settings fail as New fails them, each time.
func TestSharedErrors(t *testing.T) {
	for range 2 {
		_, err := strategy.Shared(strategy.Settings{AllowTags: "regexp:["})
		var se *strategy.SettingError
		if !errors.As(err, &se) || se.Field != strategy.FieldAllowTags {
			t.Fatalf("want a *SettingError for allow-tags, got %v", err)
		}
	}
	if _, err := strategy.Shared(strategy.Settings{Strategy: "newest"}); !errors.Is(err, strategy.ErrUnknownStrategy) {
		t.Fatalf("want ErrUnknownStrategy, got %v", err)
	}
}

// The table keeps no policy nobody holds: settings written and removed
// leave nothing behind.
func TestSharedForgetsUnusedPolicies(t *testing.T) {
	before := strategy.SharedCount()
	held := make([]*strategy.Policy, 100)
	for i := range held {
		p, err := strategy.Shared(strategy.Settings{AllowTags: "regexp:^forget-" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
		if err != nil {
			t.Fatal(err)
		}
		held[i] = p
	}
	// Other tests' policies, counted in before, may be let go meanwhile:
	// only these 100 are sure to be held.
	if n := strategy.SharedCount(); n < len(held) {
		t.Fatalf("%d policies held, want at least %d", n, len(held))
	}
	runtime.KeepAlive(held)
	held = nil
	poll.Until(t, 10*time.Second, "unused policies forgotten", func() (bool, string) {
		runtime.GC()
		n := strategy.SharedCount()
		return n <= before, "policies held: " + strconv.Itoa(n)
	})
}

// A default applied to a shared policy leaves it as it was.
func TestWithPlatforms(t *testing.T) {
	arm := []v1.Platform{{OS: "linux", Architecture: "arm64"}}
	amd := []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	p := mustNew(t, strategy.Settings{Strategy: "newest-build"})
	q := p.WithPlatforms(amd)
	if len(p.Platforms()) != 0 || len(q.Platforms()) != 1 || q.Platforms()[0].Architecture != "amd64" || q.Name() != p.Name() {
		t.Errorf("WithPlatforms gave %s from %s", q, p)
	}
	own := mustNew(t, strategy.Settings{Platforms: arm})
	if own.WithPlatforms(amd) != own || p.WithPlatforms(nil) != p {
		t.Error("WithPlatforms replaced platforms a policy names itself, or copied for no platforms")
	}
}
