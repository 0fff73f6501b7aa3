package strategy

// GlobMatchers gives the benchmarks the ignore-tags matcher as compiled
// (fast paths included) and the same pattern matched by filepath.Match
// alone.
func GlobMatchers(pattern string) (compiled, plain func(string) bool, err error) {
	g, err := compileGlob(pattern)
	p := glob{pattern: pattern, kind: globGeneral}
	return g.match, p.match, err
}

// SharedCount is how many policies Shared holds.
func SharedCount() int { return sharedCount() }
