package writeback

import "testing"

// TestPushContains: a commit of a push holds the changes of those before
// it; the tip the push was made on, and a commit before, do not; any
// other revision is not known.
func TestPushContains(t *testing.T) {
	p := &Push{Base: "b0", Commits: []string{"c1", "c2", "c3"}}
	tests := []struct {
		revision, commit string
		contains, known  bool
	}{
		{revision: "c1", commit: "c1", contains: true, known: true},
		{revision: "c3", commit: "c1", contains: true, known: true},
		{revision: "c2", commit: "c1", contains: true, known: true},
		{revision: "c1", commit: "c2", known: true},
		{revision: "b0", commit: "c2", known: true},
		{revision: "feed", commit: "c2"},
		{revision: "c3", commit: "gone"},
	}
	for _, tt := range tests {
		if contains, known := p.Contains(tt.revision, tt.commit); contains != tt.contains || known != tt.known {
			t.Errorf("revision %s, commit %s: contains %v, known %v; want %v, %v", tt.revision, tt.commit, contains, known, tt.contains, tt.known)
		}
	}
	if contains, known := (*Push)(nil).Contains("c1", "c1"); contains || known {
		t.Error("a nil push knows a revision")
	}
}
