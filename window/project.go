package window

import (
	"fmt"

	"github.com/gobwas/glob"
)

// ProjectWindow is a sync window of an AppProject with what it applies
// to: Applications by name, clusters by destination name or server,
// namespaces by destination namespace, as globs; And requires each that
// is set to match (Argo CD's andOperator), else one is enough.
type ProjectWindow struct {
	Kind, Schedule, Duration, TimeZone string
	Applications, Clusters, Namespaces []string
	And                                bool
}

// Target is what a project window is matched against: an Application's
// name and its destination.
type Target struct {
	Name                                  string
	Server, Cluster, DestinationNamespace string
}

// Matching is the windows of a project that apply to t, as Argo CD
// matches them. A window that does not parse is an error: Argo CD then
// lets no automated sync run, and nothing is written either.
func Matching(project []ProjectWindow, t Target) (Set, error) {
	var set Set
	for i, p := range project {
		if !p.matches(t) {
			continue
		}
		w, err := New(p.Kind, p.Schedule, p.Duration, p.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("sync window %d: %w", i, err)
		}
		set = append(set, w)
	}
	return set, nil
}

// matches follows Argo CD's SyncWindows.Matches: Applications, then
// clusters, then namespaces.
func (p ProjectWindow) matches(t Target) bool {
	matched, isSet := false, false
	if len(p.Applications) > 0 {
		isSet = true
		matched = anyGlob(p.Applications, t.Name)
	}
	switch {
	case p.And && isSet && !matched:
		return false
	case !p.And && matched:
		return true
	}
	if len(p.Clusters) > 0 {
		isSet = true
		matched = false
		for _, c := range p.Clusters {
			if t.Cluster != "" && globMatch(c, t.Cluster) || t.Server != "" && globMatch(c, t.Server) {
				matched = true
				break
			}
		}
	}
	switch {
	case p.And && isSet && !matched:
		return false
	case !p.And && matched:
		return true
	}
	if len(p.Namespaces) > 0 {
		matched = anyGlob(p.Namespaces, t.DestinationNamespace)
	}
	return matched
}

func anyGlob(patterns []string, v string) bool {
	for _, p := range patterns {
		if globMatch(p, v) {
			return true
		}
	}
	return false
}

// globMatch is Argo CD's: "*" matches anything, a pattern that does not
// compile nothing.
func globMatch(pattern, v string) bool {
	if pattern == "*" {
		return true
	}
	g, err := glob.Compile(pattern)
	return err == nil && g.Match(v)
}
