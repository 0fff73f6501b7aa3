package strategy

import (
	"path/filepath"
	"strings"
)

// glob is an ignore-tags pattern. The common shapes ("latest", "main-*",
// "*-debug") are matched with plain string operations; everything else goes
// to filepath.Match. FuzzGlob keeps the two in agreement. The fast paths
// earn their place in BenchmarkGlob (10,000 tags, median of 8 runs on 2
// cores): "latest" 85 µs against 284 µs, "v1.*" 84 against 240, "main-*" 87
// against 288, "*.sig" 98 against 2,187 (see docs/benchmarks.md).
type glob struct {
	pattern string
	kind    globKind
	lit     string // the pattern without its '*', for the fast kinds
}

type globKind int

const (
	globGeneral globKind = iota
	globExact            // no metacharacters
	globPrefix           // literal followed by one '*'
	globSuffix           // one '*' followed by a literal
)

// compileGlob validates pattern the way filepath.Match does and picks a
// matcher.
func compileGlob(pattern string) (glob, error) {
	// Match checks the whole pattern even against an empty name.
	if _, err := filepath.Match(pattern, ""); err != nil {
		return glob{}, err
	}
	g := glob{pattern: pattern}
	switch {
	case !strings.ContainsAny(pattern, `*?[\`):
		g.kind, g.lit = globExact, pattern
	case len(pattern) > 1 && !strings.ContainsAny(pattern[:len(pattern)-1], `*?[\`) && pattern[len(pattern)-1] == '*':
		g.kind, g.lit = globPrefix, pattern[:len(pattern)-1]
	case len(pattern) > 1 && pattern[0] == '*' && !strings.ContainsAny(pattern[1:], `*?[\`):
		g.kind, g.lit = globSuffix, pattern[1:]
	}
	return g, nil
}

func (g *glob) match(name string) bool {
	switch g.kind {
	case globExact:
		return name == g.lit
	case globPrefix:
		// '*' does not cross a path separator in filepath.Match.
		return strings.HasPrefix(name, g.lit) && !strings.ContainsRune(name[len(g.lit):], filepath.Separator)
	case globSuffix:
		return strings.HasSuffix(name, g.lit) && !strings.ContainsRune(name[:len(name)-len(g.lit)], filepath.Separator)
	}
	ok, _ := filepath.Match(g.pattern, name)
	return ok
}
