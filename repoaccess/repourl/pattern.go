package repourl

import (
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/gobwas/glob"
)

// PermittedBy applies an AppProject's sourceRepos to u the way Argo CD
// documents it: some pattern without "!" must match, and no pattern with
// "!" may. A pattern is spelt as URL.Key spells u (its host in ASCII
// case alone, so that no pattern reaches a look-alike host); "*" matches
// every repository; other patterns are globs in which * stops at '/' and
// ** does not. Argo CD's code also lets a "!" pattern that does not
// match count as a match, so that a project of deny patterns alone
// allows everything else; here such a project allows nothing, as its
// documentation says. A pattern that is no valid glob matches nothing
// when it allows and everything when it denies.
func (u URL) PermittedBy(patterns []string) bool {
	if u.raw == "" {
		return false
	}
	repo := u.Key()
	permitted := false
	for _, raw := range patterns {
		deny := strings.HasPrefix(raw, "!")
		matched, valid := patternMatch(strings.TrimPrefix(raw, "!"), repo)
		switch {
		case deny && (matched || !valid):
			return false
		case !deny && matched:
			permitted = true
		}
	}
	return permitted
}

func patternMatch(raw, key string) (matched, valid bool) {
	p := strings.TrimSpace(raw)
	if p == "*" {
		return true, true
	}
	pk, ok := patternKey(p)
	if !ok {
		return false, false
	}
	g, err := glob.Compile(pk, '/')
	if err != nil {
		return false, false
	}
	return g.Match(key), true
}

// patternKey spells a sourceRepos pattern as URL.Key spells a URL; its
// host may hold glob characters, so it is lower-cased, not checked.
func patternKey(p string) (string, bool) {
	ep, err := transport.NewEndpoint(p)
	if err != nil || ep.Protocol == "file" || ep.Host == "" {
		return "", false
	}
	return fromEndpoint(p, ep, asciiLower(ep.Host)).Key(), true
}
