package bench

import "testing"

func TestWithHandWritten(t *testing.T) {
	const kept = handWrittenMarker + "\n\n## Glob\n\nfigures\n"
	tests := []struct {
		name, report, old, want string
	}{
		{name: "no page yet", report: "# Scale\n\nnew\n", old: "", want: "# Scale\n\nnew\n"},
		{name: "page without a hand-written part", report: "# Scale\n\nnew\n", old: "# Scale\n\nold\n", want: "# Scale\n\nnew\n"},
		{name: "hand-written part kept", report: "# Scale\n\nnew\n\n", old: "# Scale\n\nold\n\n" + kept, want: "# Scale\n\nnew\n\n" + kept},
		{name: "marker inside a line is not one", report: "# Scale\n\nnew\n", old: "# Scale\n\nsee " + handWrittenMarker + "\n", want: "# Scale\n\nnew\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := withHandWritten(tt.report, tt.old); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
