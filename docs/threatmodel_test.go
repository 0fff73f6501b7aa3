package docs

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// threatColumns are the inputs table's columns, in order.
var threatColumns = []string{"input", "controlled by", "rule", "bound", "enforced in", "tests"}

// ruleColumns are the columns of the table of the four rules.
var ruleColumns = []string{"rule", "what holds", "the one place", "stress tests"}

// threatTable reads the one table of inputs of text.
func threatTable(text string) ([]threatRow, error) { return table(text, threatColumns) }

// table reads the one table of text whose header names columns.
func table(text string, columns []string) ([]threatRow, error) {
	lines := strings.Split(text, "\n")
	header := "| " + strings.Join(columns, " | ") + " |"
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
		if len(cells) != len(columns) {
			return nil, fmt.Errorf("line %d: %d cells, want %d (%s); a | inside a cell is not allowed", i+1, len(cells), len(columns), strings.Join(columns, ", "))
		}
		r := threatRow{line: i + 1, cells: map[string]string{}}
		for j, c := range cells {
			r.cells[columns[j]] = strings.TrimSpace(c)
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

// sourcePathRE matches the files an "enforced in" cell names, each with
// the list of what it declares that the row cites, if any:
// "`cycle/share.go` (`slots`, `appContext`)".
var sourcePathRE = regexp.MustCompile("`([a-z0-9_.-]+(?:/[a-z0-9_.-]+)*\\.go)`(?: \\(([^)]*)\\))?")

// symbolRE matches a cited declaration: a name, or a type's method or
// field ("Gate.Skipped").
var symbolRE = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)?)`")

// checkThreatRow says what a row lacks; tests tells whether a package
// folder declares a test, declared what a file of the repository declares
// (an error for a file that does not exist).
func checkThreatRow(r threatRow, tests func(pkg, name string) error, declared func(path string) (map[string]bool, error)) []error {
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
		names, err := declared(m[1])
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %s: no such file", r.line, m[1]))
			continue
		}
		for _, s := range symbolRE.FindAllStringSubmatch(m[2], -1) {
			if !names[s[1]] {
				errs = append(errs, fmt.Errorf("line %d: %s declares no %s", r.line, m[1], s[1]))
			}
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

// boundsAlone starts the rule cell of an input that goes through none of
// the four rules; the reason follows it.
const boundsAlone = "bounds alone:"

// checkRule says whether a row's rule cell names rules of the table of
// rules, and its enforced in cell the place of each (a rule may hold in
// more than one: fair share in the cycle's slots and in the webhook's
// places), or says why the input's bounds alone hold it. places maps each
// rule to its files.
func checkRule(r threatRow, places map[string][]string) []error {
	cell := r.cells["rule"]
	if rest, ok := strings.CutPrefix(cell, boundsAlone); ok {
		if strings.TrimSpace(rest) == "" {
			return []error{fmt.Errorf("line %d: %q without a reason", r.line, boundsAlone)}
		}
		return nil
	}
	var errs []error
	for name := range strings.SplitSeq(cell, ",") {
		name = strings.TrimSpace(name)
		files, ok := places[name]
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: rule %q: not one of the four rules, nor %q and a reason", r.line, name, boundsAlone))
			continue
		}
		if !slices.ContainsFunc(files, func(f string) bool { return strings.Contains(r.cells["enforced in"], "`"+f+"`") }) {
			errs = append(errs, fmt.Errorf("line %d: rule %s: the enforced in cell names none of its places, %s", r.line, name, strings.Join(files, ", ")))
		}
	}
	return errs
}

// rulePlaces reads the table of the four rules: each rule's files.
func rulePlaces(text string) (map[string][]string, error) {
	rows, err := table(text, ruleColumns)
	if err != nil {
		return nil, err
	}
	places := map[string][]string{}
	for _, r := range rows {
		for _, m := range sourcePathRE.FindAllStringSubmatch(r.cells["the one place"], -1) {
			places[r.cells["rule"]] = append(places[r.cells["rule"]], m[1])
		}
		if len(places[r.cells["rule"]]) == 0 {
			return nil, fmt.Errorf("line %d: rule %s names no file as its one place", r.line, r.cells["rule"])
		}
	}
	return places, nil
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
	places, err := rulePlaces(string(data))
	if err != nil {
		t.Fatalf("threat-model.md, the four rules: %v", err)
	}
	tests := repoTests("..")
	exists := func(path string) bool {
		_, err := os.Stat(filepath.Join("..", filepath.FromSlash(path)))
		return err == nil
	}
	declared := func(path string) (map[string]bool, error) {
		return declarations(filepath.Join("..", filepath.FromSlash(path)))
	}
	for _, r := range rows {
		errs := append(checkThreatRow(r, tests, declared), checkRule(r, places)...)
		for _, err := range errs {
			t.Errorf("threat-model.md:%v", strings.TrimPrefix(err.Error(), "line "))
		}
	}
	// The rules' own rows: files that exist, stress tests that do.
	rules, _ := table(string(data), ruleColumns)
	for _, r := range rules {
		for _, m := range sourcePathRE.FindAllStringSubmatch(r.cells["the one place"], -1) {
			if !exists(m[1]) {
				t.Errorf("threat-model.md:%d: %s: no such file", r.line, m[1])
			}
		}
		refs, err := testRefs(r.cells["stress tests"])
		if err != nil {
			t.Errorf("threat-model.md:%d: stress tests: %v", r.line, err)
		}
		for _, ref := range refs {
			if err := tests(ref.pkg, ref.name); err != nil {
				t.Errorf("threat-model.md:%d: %v", r.line, err)
			}
		}
	}
}

// TestThreatModelRules guards the rule check: a row names rules of the
// table, each with its one place, or its bounds alone with a reason.
func TestThreatModelRules(t *testing.T) {
	places := map[string][]string{"identity": {"repoaccess/url.go"}, "byte budget": {"internal/budget/budget.go"}}
	row := func(rule, enforced string) threatRow {
		return threatRow{line: 1, cells: map[string]string{"rule": rule, "enforced in": enforced}}
	}
	for _, tt := range []struct {
		name string
		row  threatRow
		want string
	}{
		{"one rule and its place", row("identity", "`repoaccess/url.go` (`ParseURL`)"), ""},
		{"two rules and their places", row("identity, byte budget", "`repoaccess/url.go`, `internal/budget/budget.go`"), ""},
		{"bounds alone, with why", row("bounds alone: the operator's own file", "`registry/limits.go`"), ""},
		{"bounds alone, without why", row("bounds alone:", "`registry/limits.go`"), "without a reason"},
		{"a rule that is not one", row("size", "`registry/limits.go`"), "not one of the four rules"},
		{"a rule without its place", row("identity", "`chartrepo/client.go`"), "names none of its places, repoaccess/url.go"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errs := checkRule(tt.row, places)
			switch {
			case tt.want == "" && len(errs) > 0:
				t.Errorf("got %v, want no error", errs)
			case tt.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want)):
				t.Errorf("got %v, want one error with %q", errs, tt.want)
			}
		})
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
	declared := func(path string) (map[string]bool, error) {
		if path != "registry/limits.go" {
			return nil, os.ErrNotExist
		}
		return map[string]bool{"limit": true, "Limits.Max": true}, nil
	}
	header := "| input | controlled by | rule | bound | enforced in | tests |\n|---|---|---|---|---|---|\n"
	tests := []struct {
		name, row string
		want      string // part of the one error; "" for none
	}{
		{name: "complete", row: "| tags | registry | byte budget | 100 | `registry/limits.go` | `TestA`, `TestA/sub_test`, `FuzzB` (registry) |"},
		{name: "no bound", row: "| tags | registry | byte budget |  | `registry/limits.go` | `TestA` (registry) |", want: "the bound cell is empty"},
		{name: "a dash for a bound", row: "| tags | registry | byte budget | — | `registry/limits.go` | `TestA` (registry) |", want: "the bound cell is empty"},
		{name: "no place", row: "| tags | registry | byte budget | 100 | | `TestA` (registry) |", want: "the enforced in cell is empty"},
		{name: "no test", row: "| tags | registry | byte budget | 100 | `registry/limits.go` |  |", want: "the tests cell is empty"},
		{name: "a test that does not exist", row: "| tags | registry | byte budget | 100 | `registry/limits.go` | `TestA`, `TestGone` (registry) |", want: "TestGone: no func TestGone in registry/*_test.go"},
		{name: "in another package", row: "| tags | registry | byte budget | 100 | `registry/limits.go` | `TestA` (webhook) |", want: "no func TestA in webhook"},
		{name: "without its package", row: "| tags | registry | byte budget | 100 | `registry/limits.go` | `TestA` |", want: "want test names followed by their package"},
		{name: "not a test name", row: "| tags | registry | byte budget | 100 | `registry/limits.go` | `helper` (registry) |", want: "not a test, fuzz test or benchmark name"},
		{name: "a place that is no file", row: "| tags | registry | byte budget | 100 | the registry client | `TestA` (registry) |", want: "names no file"},
		{name: "what the file declares", row: "| tags | registry | byte budget | 100 | `registry/limits.go` (`limit`, `Limits.Max`, `--flag`) | `TestA` (registry) |"},
		{name: "what the file does not declare", row: "| tags | registry | byte budget | 100 | `registry/limits.go` (`limit`, `Limits.Gone`) | `TestA` (registry) |", want: "registry/limits.go declares no Limits.Gone"},
		{name: "a file that does not exist", row: "| tags | registry | byte budget | 100 | `registry/gone.go` (`f`) | `TestA` (registry) |", want: "registry/gone.go: no such file"},
		{name: "a missing cell", row: "| tags | registry | byte budget | 100 | `TestA` (registry) |", want: "5 cells, want 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := threatTable(header + tt.row + "\n")
			var errs []error
			if err != nil {
				errs = []error{err}
			} else {
				for _, r := range rows {
					errs = append(errs, checkThreatRow(r, tested, declared)...)
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
	if _, err := threatTable(header + "| a | b | c | d | e | `TestA` (registry) |\n\n" + header); err == nil {
		t.Error("a page with two tables was accepted")
	}
}

// declarations lists what a Go file declares at its top level: functions,
// types, variables and constants by name, methods and struct fields as
// "Type.Name"; a method by its name alone too.
func declarations(path string) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			names[d.Name.Name] = true
			if d.Recv != nil && len(d.Recv.List) == 1 {
				names[receiverType(d.Recv.List[0].Type)+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					names[spec.Name.Name] = true
					if st, ok := spec.Type.(*ast.StructType); ok {
						for _, field := range st.Fields.List {
							for _, n := range field.Names {
								names[spec.Name.Name+"."+n.Name] = true
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	return names, nil
}

// receiverType is the name of a method's receiver type: T of T, *T, T[K].
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
