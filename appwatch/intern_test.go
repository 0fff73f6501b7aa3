package appwatch

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

func TestInternerKeepsValuesAndSharesStrings(t *testing.T) {
	// Each object decoded on its own, as the informer's decoder gives them.
	decoded := func() map[string]any {
		return map[string]any{
			"metadata": map[string]any{
				"resourceVersion": strings.Clone("12345"),
				"annotations":     map[string]any{"argocd-image-updater.argoproj.io/image-list": strings.Clone("app=registry.example.com/app")},
			},
			"spec":  map[string]any{"images": []any{strings.Clone("registry.example.com/app:1.0"), int64(3), true, nil}},
			"long":  strings.Repeat("x", maxInternedLen+1),
			"count": int64(7),
		}
	}
	in := newInterner()
	a := in.value(decoded()).(map[string]any)
	b := in.value(decoded()).(map[string]any)
	if diff := cmp.Diff(decoded(), a); diff != "" {
		t.Fatalf("interned object differs (-want +got):\n%s", diff)
	}
	tests := []struct {
		name   string
		of     func(map[string]any) string
		shared bool
	}{
		{"annotation value", func(o map[string]any) string {
			return o["metadata"].(map[string]any)["annotations"].(map[string]any)["argocd-image-updater.argoproj.io/image-list"].(string)
		}, true},
		{"list item", func(o map[string]any) string { return o["spec"].(map[string]any)["images"].([]any)[0].(string) }, true},
		{"field unique to each object", func(o map[string]any) string { return o["metadata"].(map[string]any)["resourceVersion"].(string) }, false},
		{"string longer than the bound", func(o map[string]any) string { return o["long"].(string) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unsafe.StringData(tt.of(a)) == unsafe.StringData(tt.of(b)); got != tt.shared {
				t.Errorf("shared = %v, want %v", got, tt.shared)
			}
		})
	}
}

func TestInternerIsBounded(t *testing.T) {
	in := newInterner()
	for i := range maxInternedStrings + 10 {
		in.str(strings.Repeat("a", i%100) + string(rune('a'+i%26)) + strings.Repeat("b", i/2600))
	}
	if n := len(in.strings); n > maxInternedStrings {
		t.Fatalf("%d strings kept, want at most %d", n, maxInternedStrings)
	}
}
