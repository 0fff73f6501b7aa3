package strategy_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/image-updater/argocd-image-updater/strategy"
)

func mustNew(t testing.TB, s strategy.Settings) *strategy.Policy {
	t.Helper()
	p, err := strategy.New(s)
	if err != nil {
		t.Fatalf("New(%+v): %v", s, err)
	}
	return p
}

const (
	sigTag  = "sha256-4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945.sig"
	attTag  = "sha256-4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945.att"
	sbomTag = "sha256-4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945.sbom"
)

func TestNewValid(t *testing.T) {
	tests := []struct {
		s         strategy.Settings
		name      strategy.Name
		needsMeta bool
	}{
		{strategy.Settings{}, strategy.SemVer, false},
		{strategy.Settings{Constraint: "~1.26"}, strategy.SemVer, false},
		{strategy.Settings{Constraint: "^2"}, strategy.SemVer, false},
		{strategy.Settings{Constraint: ">=1.2 <2"}, strategy.SemVer, false},
		{strategy.Settings{Constraint: "1.x"}, strategy.SemVer, false},
		{strategy.Settings{Constraint: " v1.2.x || >=3.0.0-0 "}, strategy.SemVer, false},
		{strategy.Settings{Strategy: "latest", Constraint: "not a range, ignored"}, strategy.NewestBuild, true},
		{strategy.Settings{Strategy: "newest-build"}, strategy.NewestBuild, true},
		{strategy.Settings{Strategy: "digest", Constraint: "latest"}, strategy.Digest, true},
		{strategy.Settings{Strategy: "name", Constraint: "[ignored"}, strategy.Alphabetical, false},
		{strategy.Settings{AllowTags: "any"}, strategy.SemVer, false},
		{strategy.Settings{AllowTags: "regexp:^v?[0-9]+\\.[0-9]+\\.[0-9]+$"}, strategy.SemVer, false},
		{strategy.Settings{AllowTags: "regexp:"}, strategy.SemVer, false},
		// Upstream matches the keyword and the prefix in any case.
		{strategy.Settings{AllowTags: "ANY"}, strategy.SemVer, false},
		{strategy.Settings{AllowTags: "RegExp:^v1"}, strategy.SemVer, false},
		{strategy.Settings{IgnoreTags: []string{"*-rc*", "latest, main", ""}}, strategy.SemVer, false},
		{strategy.Settings{Platforms: []v1.Platform{{OS: "Linux", Architecture: "amd64"}}}, strategy.SemVer, false},
	}
	for _, tt := range tests {
		p, err := strategy.New(tt.s)
		if err != nil {
			t.Errorf("New(%+v): %v", tt.s, err)
			continue
		}
		if p.Name() != tt.name || p.NeedsMetadata() != tt.needsMeta || p.Paused() {
			t.Errorf("New(%+v) = %s needsMeta=%v paused=%v", tt.s, p.Name(), p.NeedsMetadata(), p.Paused())
		}
		if p.String() == "" {
			t.Errorf("New(%+v).String() is empty", tt.s)
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name     string
		s        strategy.Settings
		field    string
		value    string
		sentinel error // checked with errors.Is when set
		errType  any   // checked with errors.As when set
	}{
		{
			name:  "unknown strategy",
			s:     strategy.Settings{Strategy: "newest"},
			field: strategy.FieldStrategy, value: "newest", sentinel: strategy.ErrUnknownStrategy,
		},
		{
			name:  "invalid constraint",
			s:     strategy.Settings{Constraint: "~>>1.2"},
			field: strategy.FieldConstraint, value: "~>>1.2",
		},
		{
			name:  "constraint that is not a range",
			s:     strategy.Settings{Constraint: "latest"},
			field: strategy.FieldConstraint, value: "latest",
		},
		{
			name:  "digest without tag",
			s:     strategy.Settings{Strategy: "digest"},
			field: strategy.FieldConstraint, value: "", sentinel: strategy.ErrNoFollowTag,
		},
		{
			name:  "digest with blank tag",
			s:     strategy.Settings{Strategy: "digest", Constraint: "  "},
			field: strategy.FieldConstraint, value: "  ", sentinel: strategy.ErrNoFollowTag,
		},
		{
			name:  "digest with a range instead of a tag",
			s:     strategy.Settings{Strategy: "digest", Constraint: "~1.2"},
			field: strategy.FieldConstraint, value: "~1.2", sentinel: strategy.ErrInvalidTag,
		},
		{
			name:  "invalid regexp",
			s:     strategy.Settings{AllowTags: "regexp:^v(1|2"},
			field: strategy.FieldAllowTags, value: "regexp:^v(1|2", errType: new(*syntax.Error),
		},
		{
			name:  "allow-tags without prefix",
			s:     strategy.Settings{AllowTags: "^v1"},
			field: strategy.FieldAllowTags, value: "^v1", sentinel: strategy.ErrAllowTagsSyntax,
		},
		{
			name:  "allow-tags with wrong prefix",
			s:     strategy.Settings{AllowTags: "regex:^v1"},
			field: strategy.FieldAllowTags, value: "regex:^v1", sentinel: strategy.ErrAllowTagsSyntax,
		},
		{
			name:  "bad glob",
			s:     strategy.Settings{IgnoreTags: []string{"ok-*", "bad[", "*"}},
			field: strategy.FieldIgnoreTags, value: "bad[", sentinel: filepath.ErrBadPattern,
		},
		{
			name:  "bad glob inside a comma list",
			s:     strategy.Settings{IgnoreTags: []string{"a, [z-"}},
			field: strategy.FieldIgnoreTags, value: "[z-", sentinel: filepath.ErrBadPattern,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := strategy.New(tt.s)
			if err == nil {
				t.Fatalf("New(%+v) = %v, want error", tt.s, p)
			}
			var se *strategy.SettingError
			if !errors.As(err, &se) {
				t.Fatalf("error %v (%T) is not a *SettingError", err, err)
			}
			if se.Field != tt.field || se.Value != tt.value {
				t.Errorf("SettingError{Field: %q, Value: %q}, want {%q, %q}", se.Field, se.Value, tt.field, tt.value)
			}
			if se.Err == nil || errors.Unwrap(err) != se.Err {
				t.Errorf("SettingError does not unwrap to its cause: %v", err)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tt.sentinel)
			}
			if tt.errType != nil && !errors.As(err, tt.errType) {
				t.Errorf("error %v does not wrap a %T", err, tt.errType)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.field) || !strings.Contains(msg, tt.value) {
				t.Errorf("error %q should name field %q and value %q", msg, tt.field, tt.value)
			}
		})
	}
}

func TestCandidates(t *testing.T) {
	all := []string{"1.0.0", "v1.1.0", "1.2.0-rc.1", "latest", "main-abc123", sigTag, attTag, sbomTag, "1.0.0", ""}
	tests := []struct {
		name string
		s    strategy.Settings
		want []string
	}{
		{
			name: "defaults drop signatures and empty names only",
			want: []string{"1.0.0", "v1.1.0", "1.2.0-rc.1", "latest", "main-abc123", "1.0.0"},
		},
		{
			name: "allow any",
			s:    strategy.Settings{AllowTags: "any"},
			want: []string{"1.0.0", "v1.1.0", "1.2.0-rc.1", "latest", "main-abc123", "1.0.0"},
		},
		{
			name: "regexp is unanchored",
			s:    strategy.Settings{AllowTags: "regexp:1\\.[01]"},
			want: []string{"1.0.0", "v1.1.0", "1.0.0"},
		},
		{
			name: "regexp matching signatures does not let them through",
			s:    strategy.Settings{AllowTags: "regexp:^sha256-"},
			want: []string{},
		},
		{
			name: "ignore globs",
			s:    strategy.Settings{IgnoreTags: []string{"latest", "main-*", "*-rc.*"}},
			want: []string{"1.0.0", "v1.1.0", "1.0.0"},
		},
		{
			name: "allow then ignore",
			s:    strategy.Settings{AllowTags: "regexp:^v?1\\.", IgnoreTags: []string{"v*"}},
			want: []string{"1.0.0", "1.2.0-rc.1", "1.0.0"},
		},
		{
			name: "paused",
			s:    strategy.Settings{IgnoreTags: []string{"latest,*"}},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustNew(t, tt.s).Candidates(all)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Candidates = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSignatureLookalikesStay(t *testing.T) {
	p := mustNew(t, strategy.Settings{})
	tags := []string{
		"sha256-4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",      // no suffix
		"sha256-4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b94.sig",   // 63 hex
		"sha256-4F53CDA18C2BAA0C0354BB5F9A3ECBE5ED12AB4D8E11BA873C2F11161202B945.sig",  // upper case
		"sha256-4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945.sign", // other suffix
		"sha512-4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945.sig",
	}
	if got := p.Candidates(tags); !reflect.DeepEqual(got, tags) {
		t.Errorf("Candidates dropped look-alikes: %q", got)
	}
}

func TestPlatformsAccessorCopies(t *testing.T) {
	in := []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	p := mustNew(t, strategy.Settings{Platforms: in})
	got := p.Platforms()
	if len(got) != 1 || !got[0].Equals(v1.Platform{OS: "linux", Architecture: "amd64"}) {
		t.Fatalf("Platforms() = %v", got)
	}
	got[0].OS = "windows"
	in[0].OS = "windows"
	if p.Platforms()[0].OS != "linux" {
		t.Error("Policy shares its platform slice with callers")
	}
}

// The allow-tags keyword and prefix in any case mean what they mean in
// lower case.
func TestAllowTagsAnyCase(t *testing.T) {
	tags := []string{"v1.0.0", "v2.0.0", "latest"}
	for _, tt := range []struct {
		allow string
		want  []string
	}{
		{"ANY", tags},
		{"Any", tags},
		{"RegExp:^v1", []string{"v1.0.0"}},
		{"REGEXP:^v2", []string{"v2.0.0"}},
	} {
		p, err := strategy.New(strategy.Settings{Strategy: "name", AllowTags: tt.allow})
		if err != nil {
			t.Fatalf("%s: %v", tt.allow, err)
		}
		if got := p.Candidates(tags); !slices.Equal(got, tt.want) {
			t.Errorf("%s: candidates %v, want %v", tt.allow, got, tt.want)
		}
	}
}
