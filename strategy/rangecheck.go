package strategy

import (
	"slices"

	"github.com/Masterminds/semver/v3"
)

// rangeCheck evaluates a semver constraint against many tags cheaply.
//
// A Masterminds constraint looks at a version only by comparing its major,
// minor and patch numbers with numbers written in the constraint (or with 0),
// and its pre-release part with pre-release parts written there. Two numbers
// that fall between the same pair of written numbers therefore always give the
// same answer. Mapping each component to a representative of its interval
// turns, for example, the thousands of tags above "~1.26" into a handful of
// distinct checks, which matters because every failing library check formats
// an error. Answers are memoised per Choose call. FuzzRangeCheck guards this
// equivalence against changes in the library. Its gain is measured together
// with the tag parser's in docs/benchmarks.md.
type rangeCheck struct {
	c      *semver.Constraints
	points []uint64 // see constraintPoints; nil disables the mapping
	memo   map[rangeKey]bool
}

type rangeKey struct {
	major, minor, patch uint64
	pre                 string
}

func newRangeCheck(c *semver.Constraints, points []uint64) *rangeCheck {
	return &rangeCheck{c: c, points: points, memo: make(map[rangeKey]bool)}
}

// canon maps x to a representative of the interval between written numbers
// that holds it: x itself if written, else one more than the written number
// below it.
func (rc *rangeCheck) canon(x uint64) uint64 {
	i, found := slices.BinarySearch(rc.points, x)
	if found || i == 0 {
		return x
	}
	return rc.points[i-1] + 1
}

func (rc *rangeCheck) allows(v *version) bool {
	k := rangeKey{rc.canon(v.major), rc.canon(v.minor), rc.canon(v.patch), v.pre}
	if ok, seen := rc.memo[k]; seen {
		return ok
	}
	ok := rc.c.Check(semver.New(k.major, k.minor, k.patch, k.pre, ""))
	rc.memo[k] = ok
	return ok
}

// constraintPoints returns every number written in a constraint, plus 0,
// sorted and without repeats. Taking every digit run, including those in
// pre-release or build parts, can only add points, which is always safe. A
// number too large for uint64 returns nil, which turns the mapping off.
func constraintPoints(s string) []uint64 {
	points := []uint64{0}
	for i := 0; i < len(s); {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		x, end, ok := parseNumber(s, i)
		if !ok {
			return nil
		}
		points = append(points, x)
		i = end
	}
	slices.Sort(points)
	return slices.Compact(points)
}
