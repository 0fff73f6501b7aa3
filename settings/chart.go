package settings

import (
	"fmt"
	"strings"
	"time"

	"github.com/image-updater/argocd-image-updater/strategy"
)

// Chart annotation keys, without the prefix.
const (
	// KeyChartList is "[<alias>=]<chart>[:<constraint>],...": the Helm
	// charts of the Application whose version (the source's
	// targetRevision) the updater keeps up to date. <chart> is the
	// source's chart field.
	KeyChartList = "chart-list"
	// The Application-wide defaults of every chart in chart-list; a
	// chart's own "<alias>.<key>" (update-strategy, allow-tags,
	// ignore-tags) wins. The images' Application-wide keys do not apply
	// to charts: a chart's versions are not its images' tags.
	KeyChartUpdateStrategy = "chart-update-strategy"
	KeyChartAllowTags      = "chart-allow-tags"
	KeyChartIgnoreTags     = "chart-ignore-tags"
)

var (
	chartAppKeys = []string{KeyChartList, KeyChartUpdateStrategy, KeyChartAllowTags, KeyChartIgnoreTags, KeyGitTagList}
	// chartKeys are those a chart reads as "<alias>.<key>".
	chartKeys = []string{KeyUpdateStrategy, KeyAllowTags, KeyIgnoreTags, KeyMinReleaseAge}
)

// MaxCharts bounds the charts of one Application: each costs an index
// fetch or a tag listing per cycle, and an Application has a few sources.
const MaxCharts = 50

// maxChartName bounds a chart's name as written in chart-list.
const maxChartName = 253

// ChartSpec is one Helm chart of an Application with its settings: an
// entry of chart-list. Its version is the targetRevision of the source
// whose chart field is Chart. Every value is parsed when the settings are
// read; the cycle only uses them.
type ChartSpec struct {
	// Alias names the chart in per-chart keys and messages; may be empty.
	Alias string
	// Chart is the chart's name, as the source's chart field has it.
	Chart string
	// Constraint is the semver range the chart's versions must satisfy
	// (what followed ':' in the entry); "" admits every release.
	Constraint string
	// Policy is the strategy with the constraint and filters, compiled
	// once and shared (strategy.Shared). Never nil in Settings.Charts.
	Policy *strategy.Policy
	// Origin is where the chart is listed.
	Origin Origin
	// MinReleaseAge is how old a version must be to be chosen, by when
	// it was first seen (or, for a chart in an OCI registry, pushed);
	// MinReleaseAgeOrigin is where it is set, "" for the controller's
	// default.
	MinReleaseAge       time.Duration
	MinReleaseAgeOrigin Origin
	// GitTag tells that the entry is of git-tag-list: Chart is then the
	// repository URL as written, and the versions the repository's tags,
	// written into the targetRevision of its git sources.
	GitTag bool
}

// Key is how messages name the chart: its alias, or its name.
func (c ChartSpec) Key() string {
	if c.Alias != "" {
		return c.Alias
	}
	return c.Chart
}

// Paused tells whether ignore-tags holds a lone "*".
func (c ChartSpec) Paused() bool { return c.Policy != nil && c.Policy.Paused() }

// ParseChart reads "<chart>[:<constraint>]", a chart-list entry without
// its alias.
func ParseChart(entry string) (ChartSpec, error) {
	var c ChartSpec
	name, constraint, _ := strings.Cut(entry, ":")
	name, c.Constraint = strings.TrimSpace(name), strings.TrimSpace(constraint)
	if name == "" {
		return c, fmt.Errorf("%q names no chart", entry)
	}
	if len(name) > maxChartName {
		return c, fmt.Errorf("chart name of %d characters, more than %d", len(name), maxChartName)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '/') {
			return c, fmt.Errorf("%q is not a chart name (letters, digits, '-', '_', '.' and '/')", name)
		}
	}
	c.Chart = name
	return c, nil
}

// compileChartPolicy sets c's Policy from the raw values; a chart's
// versions are chosen by their names, so the strategies that read image
// metadata do not apply.
func compileChartPolicy(c *ChartSpec, raw policySettings) (Problem, bool) {
	raw.Constraint, raw.ChartVersions = c.Constraint, true
	if name, err := strategy.ParseName(raw.Strategy); err == nil && (name == strategy.NewestBuild || name == strategy.Digest) {
		return Problem{Image: c.Key(), Chart: true, GitTag: c.GitTag, Origin: raw.strategyAt, Message: fmt.Sprintf("a %s is updated by semver, alphabetical or numeric, not %s (which reads image metadata)", c.Noun(), name)}, false
	}
	p, err := strategy.Shared(raw.Settings)
	if err == nil {
		c.Policy = p
		return Problem{}, true
	}
	return Problem{Image: c.Key(), Chart: true, GitTag: c.GitTag, Origin: raw.origin(err), Message: err.Error()}, false
}

// parseChartList reads chart-list and each chart's keys. aliases holds the
// image aliases already taken: an alias names one image or one chart.
func parseChartList(get func(string) (string, bool), aliases map[string]bool, problems *[]Problem) []ChartSpec {
	list, listed := get(KeyChartList)
	if !listed {
		return nil
	}
	at := AnnotationOrigin(KeyChartList)
	if n := countEntries(list); n > MaxCharts {
		*problems = append(*problems, Problem{Chart: true, Origin: at, Message: fmt.Sprintf("%d charts, more than the %d one Application may have; none of its charts is updated", n, MaxCharts)})
		return nil
	}
	var charts []ChartSpec
	seenChart := map[string]bool{}
	for entry := range strings.SplitSeq(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		var alias string
		if a, rest, ok := strings.Cut(entry, "="); ok {
			alias, entry = strings.TrimSpace(a), strings.TrimSpace(rest)
		}
		c, err := ParseChart(entry)
		c.Alias, c.Origin = alias, at
		switch {
		case strings.ContainsAny(alias, " .:@"):
			err = fmt.Errorf("alias %q must not contain spaces, '.', ':' or '@'", alias)
		case alias != "" && aliases[alias]:
			err = fmt.Errorf("alias %q is used twice; aliases must be unique among an Application's images and charts", alias)
		case err == nil && seenChart[c.Chart]:
			err = fmt.Errorf("chart %s is listed twice", c.Chart)
		}
		if err != nil {
			*problems = append(*problems, Problem{Image: entry, Chart: true, Origin: at, Message: err.Error()})
			continue
		}
		if alias != "" {
			aliases[alias] = true
		}
		seenChart[c.Chart] = true
		if readChartSettings(&c, get, problems) {
			charts = append(charts, c)
		}
	}
	if countEntries(list) == 0 {
		*problems = append(*problems, Problem{Chart: true, Origin: at, Message: "is empty: it names no chart to update"})
	}
	return charts
}

// readChartSettings reads a chart's "<alias>.<key>", falling back to the
// Application-wide "chart-<key>"; a git source's falls back to
// minimum-release-age alone.
func readChartSettings(c *ChartSpec, get func(string) (string, bool), problems *[]Problem) bool {
	value := func(key, appKey string) (string, Origin) {
		if c.Alias != "" {
			k := aliasKey(c.Alias) + "." + key
			if v, ok := get(k); ok {
				return v, AnnotationOrigin(k)
			}
		}
		if c.GitTag && appKey != KeyMinReleaseAge {
			return "", AnnotationOrigin(KeyGitTagList)
		}
		v, _ := get(appKey)
		return v, AnnotationOrigin(appKey)
	}
	var raw policySettings
	raw.Strategy, raw.strategyAt = value(KeyUpdateStrategy, KeyChartUpdateStrategy)
	raw.constraintAt = AnnotationOrigin(KeyChartList)
	if c.GitTag {
		raw.constraintAt = AnnotationOrigin(KeyGitTagList)
	}
	raw.AllowTags, raw.allowTagsAt = value(KeyAllowTags, KeyChartAllowTags)
	var ignore string
	ignore, raw.ignoreTagsAt = value(KeyIgnoreTags, KeyChartIgnoreTags)
	for g := range strings.SplitSeq(ignore, ",") {
		if g = strings.TrimSpace(g); g != "" {
			raw.IgnoreTags = append(raw.IgnoreTags, g)
		}
	}
	p, ok := compileChartPolicy(c, raw)
	if !ok {
		*problems = append(*problems, p)
	}
	// The Application-wide minimum-release-age holds for its charts too.
	if v, at := value(KeyMinReleaseAge, KeyMinReleaseAge); v != "" {
		d, err := ParseReleaseAge(v)
		if err != nil {
			// As for an image: a chart must not take a version younger
			// than its owner wants.
			*problems = append(*problems, Problem{Image: c.Key(), Chart: true, GitTag: c.GitTag, Origin: at, Message: err.Error()})
			return false
		}
		c.MinReleaseAge, c.MinReleaseAgeOrigin = d, at
	}
	return ok
}
