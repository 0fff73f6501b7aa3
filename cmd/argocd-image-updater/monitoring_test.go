package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/yaml"
)

// The monitoring examples of manifests/monitoring may only query series the
// controller serves: a misspelt or renamed metric would leave a panel empty
// or an alert silent, with no error anywhere.

var monitoringDir = filepath.Join("..", "..", "manifests", "monitoring")

// recordingRegisterer keeps what is registered, so that metric vectors
// without children, which a registry does not gather, are still seen.
type recordingRegisterer struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)

// servedSeries returns the names of the series /metrics serves, the
// _bucket, _sum and _count series of histograms and summaries included,
// each with its metric's name.
func servedSeries(t *testing.T) map[string]string {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &recordingRegisterer{Registerer: reg}
	if _, _, _, err := registerMetrics(rec); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	add := func(name string, typ dto.MetricType) {
		names[name] = name
		switch typ {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = name, name, name
		case dto.MetricType_SUMMARY:
			names[name+"_sum"], names[name+"_count"] = name, name
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	gathered := map[string]bool{}
	for _, f := range families {
		add(f.GetName(), f.GetType())
		gathered[f.GetName()] = true
	}
	// Single histograms and summaries are always gathered; vectors are
	// not until they have a child, so their type comes from their Go type.
	for _, c := range rec.collectors {
		typ := dto.MetricType_UNTYPED
		switch c.(type) {
		case *prometheus.HistogramVec:
			typ = dto.MetricType_HISTOGRAM
		case *prometheus.SummaryVec:
			typ = dto.MetricType_SUMMARY
		}
		descs := make(chan *prometheus.Desc)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			m := fqNameRE.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			if !gathered[m[1]] {
				add(m[1], typ)
			}
		}
	}
	return names
}

// promqlKeywords are the words of PromQL that are not metric names.
var promqlKeywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "atan2": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "offset": true, "start": true, "end": true, "inf": true, "nan": true,
}

// labelLists are the keywords followed by a list of label names.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// grafanaIntervalRE matches Grafana's built-in interval variables, which
// stand for a duration.
var grafanaIntervalRE = regexp.MustCompile(`\$(__\w+|\{__\w+\})`)

// metricNames returns the metric names a PromQL expression selects: bare
// names, and __name__ matchers. Function names, keywords, label names,
// strings and durations are skipped. Grafana's interval variables are
// taken as durations; other variables may only appear inside strings.
func metricNames(expr string) ([]string, error) {
	s := grafanaIntervalRE.ReplaceAllString(expr, "5m")
	var names []string
	depth := 0
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	skipSpace := func(i int) int {
		for i < len(s) && strings.ContainsRune(" \t\r\n", rune(s[i])) {
			i++
		}
		return i
	}
	str := func(i int) (string, int, error) { // s[i] is the opening quote
		q := s[i]
		for j := i + 1; j < len(s); j++ {
			if s[j] == '\\' && q != '`' {
				j++
				continue
			}
			if s[j] == q {
				return s[i+1 : j], j + 1, nil
			}
		}
		return "", 0, fmt.Errorf("unterminated string at %d", i)
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case strings.ContainsRune(" \t\r\n", rune(c)):
			i++
		case c == '"' || c == '\'' || c == '`':
			_, next, err := str(i)
			if err != nil {
				return nil, err
			}
			i = next
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("unbalanced ) at %d", i)
			}
			i++
		case c == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unterminated [ at %d", i)
			}
			i += end + 1
		case c == '{':
			// Label matchers: label names, operators and quoted values.
			i++
			for {
				i = skipSpace(i)
				if i >= len(s) {
					return nil, fmt.Errorf("unterminated { in %q", expr)
				}
				if s[i] == '}' {
					i++
					break
				}
				if s[i] == ',' {
					i++
					continue
				}
				start := i
				for i < len(s) && isIdent(s[i], i == start) {
					i++
				}
				label := s[start:i]
				if label == "" {
					return nil, fmt.Errorf("bad label matcher at %d in %q", start, expr)
				}
				i = skipSpace(i)
				opStart := i
				for i < len(s) && strings.ContainsRune("=!~", rune(s[i])) {
					i++
				}
				if i == opStart {
					return nil, fmt.Errorf("label %s has no operator in %q", label, expr)
				}
				i = skipSpace(i)
				if i >= len(s) || !strings.ContainsRune("\"'`", rune(s[i])) {
					return nil, fmt.Errorf("label %s has no quoted value in %q", label, expr)
				}
				value, next, err := str(i)
				if err != nil {
					return nil, err
				}
				if label == "__name__" {
					names = append(names, value)
				}
				i = next
			}
		case c >= '0' && c <= '9' || c == '.':
			// Numbers and durations (5m, 1h30m, 1e3, 0x1f).
			for i < len(s) && (isIdent(s[i], false) || s[i] == '.') {
				i++
			}
		case isIdent(c, true):
			start := i
			for i < len(s) && isIdent(s[i], false) {
				i++
			}
			word := s[start:i]
			next := skipSpace(i)
			switch {
			case labelLists[strings.ToLower(word)] && next < len(s) && s[next] == '(':
				end := strings.IndexByte(s[next:], ')')
				if end < 0 {
					return nil, fmt.Errorf("unterminated label list after %s", word)
				}
				i = next + end + 1
			case promqlKeywords[strings.ToLower(word)]:
			case next < len(s) && s[next] == '(':
				// A function call.
			default:
				names = append(names, word)
			}
		case strings.ContainsRune("+-*/%^=!<>,@", rune(c)):
			i++
		default:
			return nil, fmt.Errorf("unexpected %q at %d in %q", c, i, expr)
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced parentheses in %q", expr)
	}
	return names, nil
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`up`: {"up"},
		`sum by (le, registry) (rate(a_bucket{job=~"$job", registry!="x,y"}[$__rate_interval]))`: {"a_bucket"},
		`sum(rate(a_sum[10m])) / sum(rate(a_count[10m])) > 0.1`:                                  {"a_sum", "a_count"},
		`histogram_quantile(0.9, sum without (pod) (rate(b[5m:1m] offset 1h)))`:                  {"b"},
		`x * on (instance) group_left (version) y unless z == bool 1`:                            {"x", "y", "z"},
		`absent(c) or {__name__="d", job="j"} and count_values("v", e)`:                          {"c", "d", "e"},
		`label_replace(f, "dst", "$1", "src", "(.*)") @ start()`:                                 {"f"},
		`topk(5, g) by (app) + 1e3`:                                                              {"g"},
	} {
		got, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: names %q, want %q", expr, got, want)
		}
	}
	for _, bad := range []string{`sum(x`, `x{job="a"`, `x{job=a}`, `x[5m`, `x + $job`} {
		if _, err := metricNames(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// query is one PromQL expression of an example, with where it is.
type query struct{ where, expr string }

// labelValuesRE is Grafana's label_values(selector, label) variable query.
var labelValuesRE = regexp.MustCompile(`^\s*label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

type gridPos struct{ H, W, X, Y int }

type panel struct {
	ID         int
	Type       string
	Title      string
	GridPos    gridPos
	Datasource *struct{ Type, UID string }
	Targets    []struct {
		Expr       string
		RefID      string
		Datasource *struct{ Type, UID string }
	}
	Panels []panel
}

type dashboard struct {
	UID, Title string
	Templating struct {
		List []struct {
			Name, Type string
			Query      json.RawMessage
		}
	}
	Panels []panel
}

// dashboardQueries reads the dashboard, checks its structure, and returns
// its panel and variable queries.
func dashboardQueries(t *testing.T, path string) []query {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title")
	}
	var queries []query
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type != "query" {
			continue
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var obj struct{ Query string }
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("variable %s: query %s", v.Name, v.Query)
			}
			q = obj.Query
		}
		m := labelValuesRE.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, q)
			continue
		}
		queries = append(queries, query{"variable " + v.Name, m[1]})
	}
	if !vars["datasource"] {
		t.Error("the dashboard has no datasource variable")
	}

	ids := map[int]bool{}
	var placed []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if p.ID == 0 || ids[p.ID] {
				t.Errorf("%s: missing or repeated id", where)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: grid position %+v outside the 24 columns", where, g)
			}
			for _, o := range placed {
				og := o.GridPos
				if g.X < og.X+og.W && og.X < g.X+g.W && g.Y < og.Y+og.H && og.Y < g.Y+g.H {
					t.Errorf("%s overlaps panel %d %q", where, o.ID, o.Title)
				}
			}
			placed = append(placed, p)
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Title == "" || len(p.Targets) == 0 {
				t.Errorf("%s: needs a title and a query", where)
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: data source %+v, want the datasource variable", where, p.Datasource)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: missing or repeated refId %q", where, tg.RefID)
				}
				refs[tg.RefID] = true
				if tg.Expr == "" {
					t.Errorf("%s: empty query", where)
				}
				queries = append(queries, query{where + " " + tg.RefID, tg.Expr})
			}
		}
	}
	walk(d.Panels)

	// Every variable a query uses is defined.
	varRE := regexp.MustCompile(`\$\{?([a-zA-Z]\w*)`)
	for _, q := range queries {
		for _, m := range varRE.FindAllStringSubmatch(q.expr, -1) {
			if !vars[m[1]] {
				t.Errorf("%s: variable $%s is not defined", q.where, m[1])
			}
		}
	}
	return queries
}

// ruleQueries reads a PrometheusRule and returns its expressions.
func ruleQueries(t *testing.T, path string) []query {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Kind string
		Spec struct {
			Groups []struct {
				Name  string
				Rules []struct {
					Alert, Record, Expr string
					Labels              map[string]string
					Annotations         map[string]string
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if rule.Kind != "PrometheusRule" {
		t.Fatalf("%s: kind %q", path, rule.Kind)
	}
	var queries []query
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			where := "rule " + r.Alert + r.Record
			if r.Alert != "" && (r.Labels["severity"] == "" || r.Annotations["summary"] == "") {
				t.Errorf("%s: needs a severity label and a summary", where)
			}
			queries = append(queries, query{where, r.Expr})
		}
	}
	return queries
}

// unknownMetrics returns the problems of queries (names not served,
// expressions that cannot be read) and the metrics they use.
func unknownMetrics(queries []query, served map[string]string) (problems []string, used map[string]bool) {
	used = map[string]bool{}
	for _, q := range queries {
		names, err := metricNames(q.expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", q.where, err))
			continue
		}
		if len(names) == 0 {
			problems = append(problems, fmt.Sprintf("%s: selects no metric: %s", q.where, q.expr))
		}
		for _, n := range names {
			metric, ok := served[n]
			used[metric] = true
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: %s is not a metric of the controller", q.where, n))
			}
		}
	}
	return problems, used
}

func TestMonitoringExamplesUseServedMetrics(t *testing.T) {
	served := servedSeries(t)
	for _, want := range []string{
		"argocd_image_updater_images_errors_total",                     // a vector without children
		"argocd_image_updater_cycle_duration_seconds_bucket",           // a histogram's series
		"argocd_image_updater_registry_request_duration_seconds_count", // a histogram vector's
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if _, ok := served[want]; !ok {
			t.Fatalf("the served series lack %s: the test misreads the registry", want)
		}
	}

	dash := dashboardQueries(t, filepath.Join(monitoringDir, "dashboard.json"))
	rules := ruleQueries(t, filepath.Join(monitoringDir, "prometheusrule.yaml"))
	if len(dash) < 20 || len(rules) < 4 {
		t.Fatalf("%d dashboard and %d rule queries found: the files were misread", len(dash), len(rules))
	}
	problems, used := unknownMetrics(append(dash, rules...), served)
	for _, p := range problems {
		t.Error(p)
	}

	// Each of the controller's own metrics is on the dashboard or in a rule.
	var unused []string
	for _, metric := range served {
		if strings.HasPrefix(metric, "argocd_image_updater_") && !used[metric] && !slices.Contains(unused, metric) {
			unused = append(unused, metric)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("metrics used by no panel or rule: %v", unused)
	}

	// A misspelt name is caught.
	bad := []query{{"misspelt", `sum(rate(argocd_image_updater_registry_request_failed_total[5m]))`}}
	if p, _ := unknownMetrics(bad, served); len(p) != 1 {
		t.Errorf("a misspelt metric was not reported: %v", p)
	}
}
