package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/image-updater/argocd-image-updater/"

// importRule forbids the packages it names (from) to depend on any
// package forbidden reports, directly or not.
type importRule struct {
	name      string
	from      func(pkg string) bool
	forbidden func(dep string) bool
}

func under(prefixes ...string) func(string) bool {
	return func(pkg string) bool {
		for _, p := range prefixes {
			if pkg == module+p || strings.HasPrefix(pkg, module+p+"/") {
				return true
			}
		}
		return false
	}
}

func exactly(pkgs ...string) func(string) bool {
	return func(pkg string) bool {
		for _, p := range pkgs {
			if pkg == module+p {
				return true
			}
		}
		return false
	}
}

func anyOf(fs ...func(string) bool) func(string) bool {
	return func(s string) bool {
		for _, f := range fs {
			if f(s) {
				return true
			}
		}
		return false
	}
}

func clientset(dep string) bool { return dep == "k8s.io/client-go/kubernetes" }

func clientGo(dep string) bool { return strings.HasPrefix(dep, "k8s.io/client-go/") }

var testServers = under("test/testenv", "test/poll")

// product is every package of the controller: not the test servers, nor
// the packages that only hold tests.
func product(pkg string) bool {
	return strings.HasPrefix(pkg, module) && !testServers(pkg) &&
		!under("test", "docs")(pkg)
}

// importRules are the rules docs/design.md states.
var importRules = []importRule{
	{"the vocabulary imports no step nor client-go's clientset",
		exactly("settings", "settings/credref", "application"),
		anyOf(under("registry", "writeback", "chartrepo"), clientset)},
	{"forge imports no registry or write-back package nor client-go's clientset",
		under("forge"), anyOf(under("registry", "writeback"), clientset)},
	{"write-back imports no registry package", under("writeback"), under("registry")},
	{"chartrepo imports no write-back package", under("chartrepo"), under("writeback")},
	{"the repository URL value imports no client-go", under("repoaccess/repourl"), clientGo},
	{"the edits and the reading of ApplicationSets do no I/O: they import no client-go", under("writeback/manifest", "writeback/appset"), clientGo},
	{"the controller imports no test server", product, testServers},
	{"the test servers import no package of the controller", testServers, product},
}

// violations reads deps (each package, then its dependencies) and lists
// what breaks the rules.
func violations(deps map[string][]string, rules []importRule) []string {
	var out []string
	for _, r := range rules {
		for pkg, ds := range deps {
			if !r.from(pkg) {
				continue
			}
			for _, d := range ds {
				if d != pkg && r.forbidden(d) {
					out = append(out, fmt.Sprintf("%s: %s depends on %s", r.name, pkg, d))
				}
			}
		}
	}
	return out
}

// TestImportRules checks the module's imports against importRules.
func TestImportRules(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			deps[f[0]] = f[1:]
		}
	}
	if len(deps) < 40 {
		t.Fatalf("go list named %d packages", len(deps))
	}
	for _, v := range violations(deps, importRules) {
		t.Error(v)
	}
}

// TestImportRulesFail guards the rules: each fails on the import it
// forbids.
func TestImportRulesFail(t *testing.T) {
	for _, tt := range []struct{ pkg, dep string }{
		{module + "settings", module + "registry/credentials"},
		{module + "application", "k8s.io/client-go/kubernetes"},
		{module + "forge", module + "writeback/gitauth"},
		{module + "writeback/git", module + "registry"},
		{module + "chartrepo", module + "writeback/gitauth"},
		{module + "repoaccess/repourl", "k8s.io/client-go/rest"},
		{module + "cycle", module + "test/testenv"},
		{module + "test/testenv", module + "signature/layout"},
	} {
		if v := violations(map[string][]string{tt.pkg: {tt.dep}}, importRules); len(v) == 0 {
			t.Errorf("%s importing %s broke no rule", tt.pkg, tt.dep)
		}
	}
	if v := violations(map[string][]string{module + "cycle": {module + "settings", "k8s.io/client-go/kubernetes"}}, importRules); len(v) != 0 {
		t.Errorf("allowed imports broke rules: %v", v)
	}
}
