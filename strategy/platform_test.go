package strategy_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/image-updater/argocd-image-updater/strategy"
)

func TestParsePlatforms(t *testing.T) {
	amd64 := strategy.Platform{OS: "linux", Architecture: "amd64"}
	arm64v8 := strategy.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
	tests := []struct {
		in      string
		want    []strategy.Platform
		wantErr string // the bad item, when an error is expected
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "linux/amd64", want: []strategy.Platform{amd64}},
		{in: "linux/amd64,linux/arm64/v8", want: []strategy.Platform{amd64, arm64v8}},
		{in: " Linux/AMD64 , linux/arm64/v8 ,", want: []strategy.Platform{amd64, arm64v8}},
		{in: "linux/amd64,linux/amd64", want: []strategy.Platform{amd64}},
		{in: "windows/amd64", want: []strategy.Platform{{OS: "windows", Architecture: "amd64"}}},
		{in: "linux", wantErr: "linux"},
		{in: "linux/amd64,arm64", wantErr: "arm64"},
		{in: "linux/", wantErr: "linux/"},
		{in: "/amd64", wantErr: "/amd64"},
		{in: "linux/arm/v7/extra", wantErr: "linux/arm/v7/extra"},
		{in: "linux//v7", wantErr: "linux//v7"},
		{in: "linux/am d64", wantErr: "linux/am d64"},
		{in: "linux/amd64:latest", wantErr: "linux/amd64:latest"},
	}
	for _, tt := range tests {
		got, err := strategy.ParsePlatforms(tt.in)
		if tt.wantErr != "" {
			var se *strategy.SettingError
			if !errors.As(err, &se) || se.Field != strategy.FieldPlatforms || se.Value != tt.wantErr {
				t.Errorf("ParsePlatforms(%q) error = %v, want a platforms error for %q", tt.in, err, tt.wantErr)
				continue
			}
			if !errors.Is(err, strategy.ErrPlatformSyntax) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePlatforms(%q) error %q should name %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParsePlatforms(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestPlatformString(t *testing.T) {
	for in, want := range map[strategy.Platform]string{
		{OS: "linux", Architecture: "amd64"}:                "linux/amd64",
		{OS: "linux", Architecture: "arm", Variant: "v7"}:   "linux/arm/v7",
		{OS: "windows", Architecture: "arm64", Variant: ""}: "windows/arm64",
	} {
		if got := in.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", in, got, want)
		}
		back, err := strategy.ParsePlatforms(want)
		if err != nil || len(back) != 1 || back[0] != in {
			t.Errorf("ParsePlatforms(%q) = %v, %v; want round trip", want, back, err)
		}
	}
}
