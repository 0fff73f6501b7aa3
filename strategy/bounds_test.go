package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// TestFilterBounds: filters past their bounds are refused when the policy
// is built, naming the setting; filters within them are accepted.
func TestFilterBounds(t *testing.T) {
	many := func(n int, f func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	tests := []struct {
		name    string
		s       strategy.Settings
		refused string // "" when accepted
	}{
		{"a usual expression", strategy.Settings{Strategy: "semver", AllowTags: `regexp:^v?[0-9]+\.[0-9]+\.[0-9]+(-rc[0-9]+)?$`}, ""},
		{"an expression of 1,024 characters", strategy.Settings{Strategy: "semver", AllowTags: "regexp:^" + strings.Repeat("v", 1022) + "$"}, ""},
		{"an expression of 1,025 characters", strategy.Settings{Strategy: "semver", AllowTags: "regexp:^" + strings.Repeat("v", 1023) + "$"}, "allow-tags"},
		{"a short expression with a large program", strategy.Settings{Strategy: "semver", AllowTags: "regexp:(a|b){1000}"}, "instructions"},
		{"100 ignore patterns", strategy.Settings{Strategy: "semver", IgnoreTags: many(100, func(i int) string { return fmt.Sprintf("v%d.*", i) })}, ""},
		{"101 ignore patterns", strategy.Settings{Strategy: "semver", IgnoreTags: many(101, func(i int) string { return fmt.Sprintf("v%d.*", i) })}, "ignore-tags"},
		{"101 ignore patterns in one entry", strategy.Settings{Strategy: "semver", IgnoreTags: []string{strings.Join(many(101, func(i int) string { return fmt.Sprintf("v%d.*", i) }), ",")}}, "ignore-tags"},
		{"a long ignore pattern", strategy.Settings{Strategy: "semver", IgnoreTags: []string{strings.Repeat("*a", 129)}}, "ignore-tags"},
		{"33 platforms", strategy.Settings{Strategy: "newest-build", Platforms: make([]v1.Platform, 33)}, "platforms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := strategy.New(tt.s)
			switch {
			case tt.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.refused != "" && (!errors.Is(err, strategy.ErrFilterTooLarge) || !strings.Contains(err.Error(), tt.refused)):
				t.Errorf("got %v, want a refusal naming %s", err, tt.refused)
			case err != nil && len(err.Error()) > 400:
				t.Errorf("the error quotes too much: %d characters", len(err.Error()))
			}
		})
	}
}

// TestChooseStopsAtDeadline: an allow-tags expression within its bounds
// that costs most of a millisecond per tag is stopped by the image's
// deadline instead of running to the end of 100,000 tags (about a minute
// on 2 cores).
func TestChooseStopsAtDeadline(t *testing.T) {
	expr := `(a*)*(a*)*(a*)*b` + strings.Repeat(`|(x*y*z*)*q`, 30)
	p, err := strategy.New(strategy.Settings{Strategy: "semver", AllowTags: "regexp:" + expr})
	if err != nil {
		t.Fatal(err)
	}
	tags := make([]string, 100000)
	for i := range tags {
		tags[i] = strings.Repeat("a", 120) + fmt.Sprintf("%07d", i)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = p.Choose(ctx, tags, imageref.Version{Tag: "v1"}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the choice stopped at the deadline", err)
	}
}
