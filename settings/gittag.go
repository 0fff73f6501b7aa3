package settings

import (
	"errors"
	"fmt"
	"strings"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
)

// KeyGitTagList is "[<alias>=]<repository>[:<constraint>],...": the git
// repositories whose sources the Application pins to a tag
// (targetRevision: v1.4.2), to be moved to the newest tag within the
// constraint. <repository> is the source's repoURL, compared as Argo CD
// compares repository URLs; every source of the Application from that
// repository is moved. Each entry reads "<alias>.<key>" as a chart does,
// with no Application-wide defaults but minimum-release-age.
const KeyGitTagList = "git-tag-list"

// MaxGitTagSources bounds the repositories of git-tag-list: each costs a
// listing of the repository's references per cycle.
const MaxGitTagSources = 20

// maxRepositoryURL bounds a repository URL as written in git-tag-list.
const maxRepositoryURL = 2048

// Noun is how messages name what c versions: a chart, or a git source.
func (c ChartSpec) Noun() string {
	if c.GitTag {
		return "git source"
	}
	return "chart"
}

// ParseGitTag reads "<repository>[:<constraint>]", a git-tag-list entry
// without its alias. The constraint follows the last ':' when what
// follows it has no '/': a URL's own colons (its scheme, a port, the
// scp-like "git@host:org/repo") are always followed by one.
func ParseGitTag(entry string) (ChartSpec, error) {
	c := ChartSpec{GitTag: true}
	repo := strings.TrimSpace(entry)
	if i := strings.LastIndex(repo, ":"); i >= 0 && !strings.Contains(repo[i+1:], "/") {
		repo, c.Constraint = strings.TrimSpace(repo[:i]), strings.TrimSpace(repo[i+1:])
	}
	if repo == "" {
		return c, fmt.Errorf("%q names no repository", entry)
	}
	if err := checkRepositoryURL(repo); err != nil {
		return c, err
	}
	c.Chart = repo
	return c, nil
}

// checkRepositoryURL refuses what cannot be a source's repoURL; whether it
// is one of the Application's sources is told where they are compared.
func checkRepositoryURL(repo string) error {
	switch {
	case len(repo) > maxRepositoryURL:
		return fmt.Errorf("repository URL of %d characters, more than %d", len(repo), maxRepositoryURL)
	case strings.ContainsAny(repo, " \t\"'\\"):
		return fmt.Errorf("%q is not a repository URL", repo)
	case !strings.Contains(repo, "/"):
		return fmt.Errorf("%q is not a repository URL: write the source's repoURL", repo)
	}
	return nil
}

// gitTagConfigs reads an applicationRef's gitTags; their settings are
// their own, as git-tag-list's are. aliases holds those of the ref's
// images and charts.
func gitTagConfigs(ref api.ApplicationRef, refAt Origin, levels []level, aliases map[string]bool, problems *[]Problem) []ChartSpec {
	if len(ref.GitTags) > MaxGitTagSources {
		*problems = append(*problems, Problem{Chart: true, GitTag: true, Origin: refAt.Child(".gitTags"), Message: fmt.Sprintf("%d repositories, more than the %d one Application may have; none of its git sources is updated", len(ref.GitTags), MaxGitTagSources)})
		return nil
	}
	var out []ChartSpec
	seen := map[string]bool{}
	for j, g := range ref.GitTags {
		at := refAt.Child(".gitTags[%d]", j)
		repo := strings.TrimSpace(g.RepoURL)
		spec := ChartSpec{GitTag: true, Alias: g.Alias, Chart: repo, Constraint: strings.TrimSpace(g.Constraint), Origin: at.Child(".repoURL")}
		err := checkRepositoryURL(repo)
		switch {
		case err != nil:
		case g.Alias == "":
			err = errors.New("a git repository needs an alias")
		case aliases[g.Alias]:
			err = fmt.Errorf("alias %q is used twice; aliases must be unique among the ref's images, charts and git repositories", g.Alias)
		case seen[repo]:
			err = fmt.Errorf("repository %s is listed twice", repo)
		}
		if err != nil {
			*problems = append(*problems, Problem{Image: g.Alias, Chart: true, GitTag: true, Origin: spec.Origin, Message: err.Error()})
			continue
		}
		aliases[g.Alias], seen[repo] = true, true
		if refEntryPolicy(&spec, at, at.Child(".constraint"), g.UpdateStrategy, g.AllowTags, g.IgnoreTags, levels, problems) {
			out = append(out, spec)
		}
	}
	return out
}

// parseGitTagList reads git-tag-list and each entry's keys. aliases holds
// the aliases already taken by images and charts.
func parseGitTagList(get func(string) (string, bool), aliases map[string]bool, problems *[]Problem) []ChartSpec {
	list, listed := get(KeyGitTagList)
	if !listed {
		return nil
	}
	at := AnnotationOrigin(KeyGitTagList)
	if n := countEntries(list); n > MaxGitTagSources {
		*problems = append(*problems, Problem{Chart: true, GitTag: true, Origin: at, Message: fmt.Sprintf("%d repositories, more than the %d one Application may have; none of its git sources is updated", n, MaxGitTagSources)})
		return nil
	}
	var out []ChartSpec
	seen := map[string]bool{}
	for entry := range strings.SplitSeq(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		var alias string
		// An alias is before the first '=', which no URL of a
		// repository has before its path.
		if a, rest, ok := strings.Cut(entry, "="); ok && !strings.Contains(a, "/") {
			alias, entry = strings.TrimSpace(a), strings.TrimSpace(rest)
		}
		c, err := ParseGitTag(entry)
		c.Alias, c.Origin = alias, at
		switch {
		case strings.ContainsAny(alias, " .:@"):
			err = fmt.Errorf("alias %q must not contain spaces, '.', ':' or '@'", alias)
		case alias != "" && aliases[alias]:
			err = fmt.Errorf("alias %q is used twice; aliases must be unique among an Application's images, charts and git sources", alias)
		case err == nil && seen[c.Chart]:
			err = fmt.Errorf("repository %s is listed twice", c.Chart)
		}
		if err != nil {
			*problems = append(*problems, Problem{Image: entry, Chart: true, GitTag: true, Origin: at, Message: err.Error()})
			continue
		}
		if alias != "" {
			aliases[alias] = true
		}
		seen[c.Chart] = true
		if readChartSettings(&c, get, problems) {
			out = append(out, c)
		}
	}
	if countEntries(list) == 0 {
		*problems = append(*problems, Problem{Chart: true, GitTag: true, Origin: at, Message: "is empty: it names no repository to update"})
	}
	return out
}
