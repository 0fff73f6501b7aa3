package docs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The threat model's table (threat-model.md) is the list a review of a new
// feature adds to: every row needs a bound, where it is enforced, and tests
// that exist. An input without them belongs under Open, not in the table.

// threatRow is one row of the table, by its column names.
type threatRow struct {
	line  int // 1-based, in the file
	cells map[string]string
}

// threatColumns are the table's columns, in order.
var threatColumns = []string{"input", "controlled by", "bound", "enforced in", "tests"}

// threatTable reads the one table of text: the rows under the header that
// names threatColumns.
func threatTable(text string) ([]threatRow, error) {
	lines := strings.Split(text, "\n")
	header := "| " + strings.Join(threatColumns, " | ") + " |"
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == header {
			if start >= 0 {
				return nil, fmt.Errorf("line %d: a second table; the inputs are listed in one", i+1)
			}
			start = i
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no table with the header %q", header)
	}
	if start+1 >= len(lines) || !regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+$`).MatchString(strings.TrimSpace(lines[start+1])) {
		return nil, fmt.Errorf("line %d: the header is not followed by its separator row", start+2)
	}
	var rows []threatRow
	for i := start + 2; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasSuffix(l, "|") {
			return nil, fmt.Errorf("line %d: the row does not end with |", i+1)
		}
		cells := strings.Split(l[1:len(l)-1], "|")
		if len(cells) != len(threatColumns) {
			return nil, fmt.Errorf("line %d: %d cells, want %d (%s); a | inside a cell is not allowed", i+1, len(cells), len(threatColumns), strings.Join(threatColumns, ", "))
		}
		r := threatRow{line: i + 1, cells: map[string]string{}}
		for j, c := range cells {
			r.cells[threatColumns[j]] = strings.TrimSpace(c)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, errors.New("the table has no rows")
	}
	return rows, nil
}

// testRef is a test a row cites: its name (a subtest path is cut to its
// top-level test) and the package folder it is in.
type testRef struct {
	name, pkg string
}

var (
	testNameRE = regexp.MustCompile("^`((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)(/[^`]*)?`$")
	testPkgRE  = regexp.MustCompile(`^(.*\S)\s*\(([a-z0-9][a-z0-9_./-]*)\)$`)
)

// testRefs reads a tests cell: groups separated by ";", each a list of
// backquoted test names followed by the package's folder in parentheses:
// "`TestA`, `TestB/sub` (registry); `FuzzC` (internal/netguard)".
func testRefs(cell string) ([]testRef, error) {
	var refs []testRef
	for group := range strings.SplitSeq(cell, ";") {
		group = strings.TrimSpace(group)
		m := testPkgRE.FindStringSubmatch(group)
		if m == nil {
			return nil, fmt.Errorf("%q: want test names followed by their package's folder in parentheses", group)
		}
		for name := range strings.SplitSeq(m[1], ",") {
			n := testNameRE.FindStringSubmatch(strings.TrimSpace(name))
			if n == nil {
				return nil, fmt.Errorf("%q: not a test, fuzz test or benchmark name in backquotes", strings.TrimSpace(name))
			}
			refs = append(refs, testRef{name: n[1], pkg: m[2]})
		}
	}
	return refs, nil
}

// sourcePathRE matches the files an "enforced in" cell names.
var sourcePathRE = regexp.MustCompile("`([a-z0-9_.-]+(?:/[a-z0-9_.-]+)*\\.go)`")

// checkThreatRow says what a row lacks; tests tells whether a package
// folder declares a test, exists whether a file of the repository does.
func checkThreatRow(r threatRow, tests func(pkg, name string) error, exists func(path string) bool) []error {
	var errs []error
	for _, col := range threatColumns {
		if v := r.cells[col]; v == "" || strings.Trim(v, "-—– ") == "" {
			errs = append(errs, fmt.Errorf("line %d: the %s cell is empty", r.line, col))
		}
	}
	place := sourcePathRE.FindAllStringSubmatch(r.cells["enforced in"], -1)
	if r.cells["enforced in"] != "" && len(place) == 0 {
		errs = append(errs, fmt.Errorf("line %d: the enforced in cell names no file (`package/file.go`)", r.line))
	}
	for _, m := range place {
		if !exists(m[1]) {
			errs = append(errs, fmt.Errorf("line %d: %s: no such file", r.line, m[1]))
		}
	}
	if r.cells["tests"] == "" {
		return errs
	}
	refs, err := testRefs(r.cells["tests"])
	if err != nil {
		return append(errs, fmt.Errorf("line %d: tests: %w", r.line, err))
	}
	for _, ref := range refs {
		if err := tests(ref.pkg, ref.name); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", r.line, err))
		}
	}
	return errs
}

var testFuncRE = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)

// repoTests finds the tests of a package folder of the repository (the
// folder above docs), reading each folder's _test.go files once.
func repoTests(root string) func(pkg, name string) error {
	declared := map[string]map[string]bool{}
	return func(pkg, name string) error {
		if _, ok := declared[pkg]; !ok {
			files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pkg), "*_test.go"))
			if err != nil {
				return err
			}
			names := map[string]bool{}
			for _, f := range files {
				src, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				for _, m := range testFuncRE.FindAllStringSubmatch(string(src), -1) {
					names[m[1]] = true
				}
			}
			declared[pkg] = names
		}
		if !declared[pkg][name] {
			return fmt.Errorf("%s: no func %s in %s/*_test.go", name, name, pkg)
		}
		return nil
	}
}

// TestThreatModel checks the table of threat-model.md: one row per input,
// none without a bound, the place that enforces it, and tests that exist
// in the packages named.
func TestThreatModel(t *testing.T) {
	data, err := os.ReadFile("threat-model.md")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := threatTable(string(data))
	if err != nil {
		t.Fatalf("threat-model.md: %v", err)
	}
	tests := repoTests("..")
	exists := func(path string) bool {
		_, err := os.Stat(filepath.Join("..", filepath.FromSlash(path)))
		return err == nil
	}
	for _, r := range rows {
		for _, err := range checkThreatRow(r, tests, exists) {
			t.Errorf("threat-model.md:%v", strings.TrimPrefix(err.Error(), "line "))
		}
	}
}

// TestThreatModelChecks guards the checks themselves: rows that lack a
// cell, cite a test that does not exist, or cite it without its package.
func TestThreatModelChecks(t *testing.T) {
	tested := func(pkg, name string) error {
		if pkg == "registry" && (name == "TestA" || name == "FuzzB") {
			return nil
		}
		return fmt.Errorf("%s: no func %s in %s/*_test.go", name, name, pkg)
	}
	exists := func(path string) bool { return path == "registry/limits.go" }
	header := "| input | controlled by | bound | enforced in | tests |\n|---|---|---|---|---|\n"
	tests := []struct {
		name, row string
		want      string // part of the one error; "" for none
	}{
		{name: "complete", row: "| tags | registry | 100 | `registry/limits.go` | `TestA`, `TestA/sub_test`, `FuzzB` (registry) |"},
		{name: "no bound", row: "| tags | registry |  | `registry/limits.go` | `TestA` (registry) |", want: "the bound cell is empty"},
		{name: "a dash for a bound", row: "| tags | registry | — | `registry/limits.go` | `TestA` (registry) |", want: "the bound cell is empty"},
		{name: "no place", row: "| tags | registry | 100 | | `TestA` (registry) |", want: "the enforced in cell is empty"},
		{name: "no test", row: "| tags | registry | 100 | `registry/limits.go` |  |", want: "the tests cell is empty"},
		{name: "a test that does not exist", row: "| tags | registry | 100 | `registry/limits.go` | `TestA`, `TestGone` (registry) |", want: "TestGone: no func TestGone in registry/*_test.go"},
		{name: "in another package", row: "| tags | registry | 100 | `registry/limits.go` | `TestA` (webhook) |", want: "no func TestA in webhook"},
		{name: "without its package", row: "| tags | registry | 100 | `registry/limits.go` | `TestA` |", want: "want test names followed by their package"},
		{name: "not a test name", row: "| tags | registry | 100 | `registry/limits.go` | `helper` (registry) |", want: "not a test, fuzz test or benchmark name"},
		{name: "a place that is no file", row: "| tags | registry | 100 | the registry client | `TestA` (registry) |", want: "names no file"},
		{name: "a file that does not exist", row: "| tags | registry | 100 | `registry/gone.go` (`f`) | `TestA` (registry) |", want: "registry/gone.go: no such file"},
		{name: "a missing cell", row: "| tags | registry | 100 | `TestA` (registry) |", want: "4 cells, want 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := threatTable(header + tt.row + "\n")
			var errs []error
			if err != nil {
				errs = []error{err}
			} else {
				for _, r := range rows {
					errs = append(errs, checkThreatRow(r, tested, exists)...)
				}
			}
			switch {
			case tt.want == "" && len(errs) > 0:
				t.Errorf("got %v, want no error", errs)
			case tt.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want)):
				t.Errorf("got %v, want one error with %q", errs, tt.want)
			}
		})
	}
	if _, err := threatTable("# no table\n"); err == nil {
		t.Error("a page without the table was accepted")
	}
	if _, err := threatTable(header + "| a | b | c | d | `TestA` (registry) |\n\n" + header); err == nil {
		t.Error("a page with two tables was accepted")
	}
}
