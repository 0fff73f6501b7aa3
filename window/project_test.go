package window

import "testing"

func TestMatching(t *testing.T) {
	prod := Target{Name: "shop-prod", Server: "https://prod.example.com", DestinationNamespace: "shop"}
	deny := func(p ProjectWindow) ProjectWindow {
		p.Kind, p.Schedule, p.Duration = "deny", "0 0 * * *", "1h"
		return p
	}
	tests := []struct {
		name   string
		window ProjectWindow
		want   bool
	}{
		{"by name", deny(ProjectWindow{Applications: []string{"shop-*"}}), true},
		{"by another name", deny(ProjectWindow{Applications: []string{"cart-*"}}), false},
		{"by server", deny(ProjectWindow{Clusters: []string{"https://prod.*"}}), true},
		{"by namespace", deny(ProjectWindow{Namespaces: []string{"shop"}}), true},
		{"one of them is enough", deny(ProjectWindow{Applications: []string{"cart-*"}, Namespaces: []string{"shop"}}), true},
		{"and: each set must match", deny(ProjectWindow{Applications: []string{"shop-*"}, Namespaces: []string{"cart"}, And: true}), false},
		{"and: all match", deny(ProjectWindow{Applications: []string{"shop-*"}, Clusters: []string{"*"}, Namespaces: []string{"sh*"}, And: true}), true},
		{"nothing set matches nothing", deny(ProjectWindow{}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Matching([]ProjectWindow{tt.window}, prod)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(set) == 1; got != tt.want {
				t.Errorf("matched %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := Matching([]ProjectWindow{{Kind: "allow", Schedule: "bad", Duration: "1h", Applications: []string{"*"}}}, prod); err == nil {
		t.Error("a window that does not parse gave no error")
	}
}
