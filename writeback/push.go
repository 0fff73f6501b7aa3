package writeback

import "slices"

// Push is what one push to a branch carried: the tip it was made on and
// the commits it added, in order, each the child of the one before, the
// last the tip pushed. Every commit of it holds the changes of those
// before it; the tip it was made on holds none of them.
type Push struct {
	Base    string
	Commits []string
}

// Contains tells whether revision holds the change of commit, one of
// p's Commits, as far as p tells: known is false when revision is none
// of p's.
func (p *Push) Contains(revision, commit string) (contains, known bool) {
	if p == nil {
		return false, false
	}
	if revision == p.Base {
		return false, true
	}
	at := -1
	for i, c := range p.Commits {
		if c == commit {
			at = i
		}
		if c == revision {
			return at >= 0, at >= 0 || slices.Contains(p.Commits[i:], commit)
		}
	}
	return false, false
}
