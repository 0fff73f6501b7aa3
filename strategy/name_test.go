package strategy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/strategy"
)

func TestParseName(t *testing.T) {
	tests := []struct {
		in   string
		want strategy.Name
	}{
		{"", strategy.SemVer},
		{"semver", strategy.SemVer},
		{"  SemVer ", strategy.SemVer},
		{"newest-build", strategy.NewestBuild},
		{"latest", strategy.NewestBuild},
		{"digest", strategy.Digest},
		{"alphabetical", strategy.Alphabetical},
		{"name", strategy.Alphabetical},
		{"NAME", strategy.Alphabetical},
	}
	for _, tt := range tests {
		got, err := strategy.ParseName(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseNameUnknown(t *testing.T) {
	for _, in := range []string{"semvr", "newest", "lexical", "digest:latest", "*"} {
		got, err := strategy.ParseName(in)
		if err == nil {
			t.Errorf("ParseName(%q) = %q, want error", in, got)
			continue
		}
		if !errors.Is(err, strategy.ErrUnknownStrategy) {
			t.Errorf("ParseName(%q) error %v does not wrap ErrUnknownStrategy", in, err)
		}
		var se *strategy.SettingError
		if !errors.As(err, &se) || se.Field != strategy.FieldStrategy || se.Value != in {
			t.Errorf("ParseName(%q) error %#v is not a SettingError for the strategy field", in, err)
		}
		msg := err.Error()
		for _, want := range []string{`"` + in + `"`, "update-strategy", "semver", "newest-build", "digest", "alphabetical", "latest", "name"} {
			if !strings.Contains(msg, want) {
				t.Errorf("ParseName(%q) error %q does not mention %q", in, msg, want)
			}
		}
	}
}

func TestNamesRoundTrip(t *testing.T) {
	for _, n := range []strategy.Name{strategy.SemVer, strategy.NewestBuild, strategy.Digest, strategy.Alphabetical} {
		got, err := strategy.ParseName(string(n))
		if err != nil || got != n {
			t.Errorf("ParseName(%q) = %q, %v", n, got, err)
		}
	}
}
