package settings

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
)

func TestParseChartList(t *testing.T) {
	tests := []struct {
		name         string
		annotations  map[string]string
		want         []string // "<key> <chart> <constraint> <policy>"
		wantProblems []string // substrings, in order
	}{
		{
			name:        "charts with constraints and aliases",
			annotations: ann("chart-list", "app=podinfo:^6.5, redis:~18.0,plain"),
			want:        []string{`app podinfo ^6.5 semver constraint="^6.5"`, `redis redis ~18.0 semver constraint="~18.0"`, "plain plain  semver"},
		},
		{
			name: "a chart's own keys win over the chart- defaults; the images' keys do not apply",
			annotations: ann("chart-list", "app=podinfo,db=postgresql",
				"app.allow-tags", "regexp:^6\\.", "chart-allow-tags", "regexp:^1", "allow-tags", "regexp:^x",
				"chart-update-strategy", "alphabetical"),
			want: []string{`app podinfo  alphabetical allow-tags="regexp:^6\\."`, `db postgresql  alphabetical allow-tags="regexp:^1"`},
		},
		{
			name:        "images and charts together",
			annotations: ann("image-list", "web=nginx", "chart-list", "app=podinfo", "web.allow-tags", "any", "app.ignore-tags", "6.0.*"),
			want:        []string{`app podinfo  semver ignore-tags="6.0.*"`},
		},
		{
			name:         "an alias names one image or one chart",
			annotations:  ann("image-list", "web=nginx", "chart-list", "web=podinfo"),
			wantProblems: []string{`alias "web" is used twice`},
		},
		{
			name:         "a strategy that reads image metadata",
			annotations:  ann("chart-list", "app=podinfo", "app.update-strategy", "newest-build"),
			wantProblems: []string{"annotation argocd-image-updater.argoproj.io/app.update-strategy (chart app): a chart is updated by semver, alphabetical or numeric"},
		},
		{
			name:         "a bad constraint is named at chart-list",
			annotations:  ann("chart-list", "podinfo:^^1"),
			wantProblems: []string{"annotation argocd-image-updater.argoproj.io/chart-list (chart podinfo): invalid constraint"},
		},
		{
			name:         "a bad filter is named where it is written",
			annotations:  ann("chart-list", "podinfo", "chart-allow-tags", "regexp:("),
			wantProblems: []string{"chart-allow-tags"},
		},
		{
			name:         "empty",
			annotations:  ann("chart-list", " , "),
			wantProblems: []string{"chart-list: is empty"},
		},
		{
			name:         "not a chart name",
			annotations:  ann("chart-list", "pod info, ok"),
			want:         []string{"ok ok  semver"},
			wantProblems: []string{"is not a chart name"},
		},
		{
			name:         "listed twice",
			annotations:  ann("chart-list", "a=podinfo,b=podinfo"),
			want:         []string{"a podinfo  semver"},
			wantProblems: []string{"chart podinfo is listed twice"},
		},
		{
			name:         "an image key under a chart's alias",
			annotations:  ann("chart-list", "app=podinfo", "app.helm.image-tag", "x"),
			want:         []string{"app podinfo  semver"},
			wantProblems: []string{`"app" is the alias of a chart`},
		},
		{
			name:         "too many",
			annotations:  ann("chart-list", strings.Repeat("c,", MaxCharts+1)),
			wantProblems: []string{"51 charts, more than the 50"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !Managed(tt.annotations) {
				t.Fatal("an Application with chart-list is not managed")
			}
			s := ParseAnnotations(tt.annotations)
			var got []string
			for _, c := range s.Charts {
				got = append(got, strings.TrimSpace(c.Key()+" "+c.Chart+" "+c.Constraint+" "+c.Policy.String()))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("charts\n got %q\nwant %q", got, tt.want)
			}
			var problems []string
			for _, p := range s.Problems {
				problems = append(problems, p.Error())
			}
			if len(problems) != len(tt.wantProblems) {
				t.Fatalf("problems %q, want %q", problems, tt.wantProblems)
			}
			for i, w := range tt.wantProblems {
				if !strings.Contains(problems[i], w) {
					t.Errorf("problem %d: %q does not contain %q", i, problems[i], w)
				}
			}
		})
	}
}

func FuzzParseChartList(f *testing.F) {
	f.Add("app=podinfo:^6.5,redis:~18.0", "app", "semver", "regexp:^6")
	f.Add("a=b=c,,=:,x@y:z", "a", "alphabetical", "")
	f.Add("=,:,:^1,a/b:>=1 <2", "", "digest", "*")
	f.Fuzz(func(t *testing.T, list, alias, strategy, ignore string) {
		s := ParseAnnotations(ann("chart-list", list, alias+".update-strategy", strategy, "chart-ignore-tags", ignore))
		seen := map[string]bool{}
		for _, c := range s.Charts {
			if c.Chart == "" || c.Policy == nil {
				t.Fatalf("chart %+v from %q", c, list)
			}
			if seen[c.Chart] {
				t.Fatalf("chart %q twice", c.Chart)
			}
			seen[c.Chart] = true
		}
		if len(s.Charts) > MaxCharts {
			t.Fatalf("%d charts", len(s.Charts))
		}
	})
}

func TestImageUpdaterCharts(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name         string
		ref          api.ApplicationRef
		want         []string // "<key> <chart> <policy>"
		wantProblems []string
	}{
		{
			name: "charts with their own settings; the images' do not apply",
			ref: api.ApplicationRef{
				CommonUpdateSettings: &api.CommonUpdateSettings{AllowTags: str("regexp:^v")},
				Charts: []api.ChartConfig{
					{Alias: "db", ChartName: "postgresql:^15", IgnoreTags: []string{"15.0.*"}},
					{Alias: "web", ChartName: "podinfo", UpdateStrategy: str("alphabetical"), AllowTags: str("regexp:^6")},
				},
			},
			want: []string{`db postgresql semver constraint="^15" ignore-tags="15.0.*"`, `web podinfo alphabetical allow-tags="regexp:^6"`},
		},
		{
			name: "bad values are named at their field",
			ref: api.ApplicationRef{
				Images: []api.ImageConfig{{Alias: "web", ImageName: "nginx"}},
				Charts: []api.ChartConfig{
					{Alias: "web", ChartName: "podinfo"},
					{Alias: "db", ChartName: "postgresql:^^1"},
					{Alias: "c", ChartName: "redis", UpdateStrategy: str("digest")},
					{Alias: "d", ChartName: "memcached"},
				},
			},
			want: []string{"d memcached semver"},
			wantProblems: []string{
				`ImageUpdater ns/iu spec.applicationRefs[0].charts[0].chartName (chart web): alias "web" is used twice`,
				"ImageUpdater ns/iu spec.applicationRefs[0].charts[1].chartName (chart db): invalid constraint",
				"ImageUpdater ns/iu spec.applicationRefs[0].charts[2].updateStrategy (chart c): a chart is updated by semver, alphabetical or numeric",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.ref.NamePattern = "*"
			iu := &api.ImageUpdater{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iu"}, Spec: api.ImageUpdaterSpec{ApplicationRefs: []api.ApplicationRef{tt.ref}}}
			s := ParseImageUpdater(iu, 0)
			var got []string
			for _, c := range s.Charts {
				got = append(got, c.Key()+" "+c.Chart+" "+c.Policy.String())
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("charts\n got %q\nwant %q", got, tt.want)
			}
			var problems []string
			for _, p := range s.Problems {
				problems = append(problems, p.Error())
			}
			if len(problems) != len(tt.wantProblems) {
				t.Fatalf("problems %q, want %q", problems, tt.wantProblems)
			}
			for i, w := range tt.wantProblems {
				if !strings.Contains(problems[i], w) {
					t.Errorf("problem %d: %q does not contain %q", i, problems[i], w)
				}
			}
		})
	}
}
