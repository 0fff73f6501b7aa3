package bench

import (
	"os"
	"strings"
	"testing"
)

func TestKeepHandWritten(t *testing.T) {
	const head = "# Scale benchmark\n\nnew figures"
	const gen = head + "\n\n"
	section := func(body string) string { return keptBegin + body + keptEnd }
	tests := []struct {
		name, old, want string
	}{
		{"no previous file", "", gen},
		{"nothing marked", "# Scale benchmark\n\nold figures\n", gen},
		{
			"one section, old generated text dropped",
			"# Scale benchmark\n\nold figures\n" + section("\n## Semver\n\n| a | b |\n") + "\n",
			head + "\n\n" + section("\n## Semver\n\n| a | b |\n") + "\n",
		},
		{
			"two sections in order",
			section("\n## One\n") + "\nold\n" + section("\n## Two\n"),
			head + "\n\n" + section("\n## One\n") + "\n\n" + section("\n## Two\n") + "\n",
		},
		{
			"end marker missing: kept to the end",
			"old\n" + keptBegin + "\n## Semver\ntext\n\n",
			head + "\n\n" + section("\n## Semver\ntext\n") + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := keepHandWritten(gen, tt.old)
			if got != tt.want {
				t.Errorf("keepHandWritten:\n%q\nwant\n%q", got, tt.want)
			}
			// Rewriting the rewritten file again must change nothing.
			if again := keepHandWritten(gen, got); again != got {
				t.Errorf("second rewrite differs:\n%q\nfrom\n%q", again, got)
			}
		})
	}
}

// The semver comparison in docs/benchmarks.md is measured by hand; make
// bench must not drop it.
func TestReportKeepsSemverSection(t *testing.T) {
	old, err := os.ReadFile("../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## Semver: our parser against Masterminds/semver v3"
	if got := keepHandWritten("# Scale benchmark\n", string(old)); !strings.Contains(got, heading) {
		t.Errorf("a rewrite of docs/benchmarks.md drops %q", heading)
	}
}
