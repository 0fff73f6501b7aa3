package settings

import (
	"errors"
	"fmt"
	"strings"

	"github.com/image-updater/argocd-image-updater/window"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/platform"
	"github.com/image-updater/argocd-image-updater/strategy"
)

// DefaultCosignKeyField is the Secret key read when cosignKey names none:
// where `cosign generate-key-pair k8s://` puts the public key.
const DefaultCosignKeyField = "cosign.pub"

// level is one level of settings (spec, applicationRef, image) with where
// it is written.
type level struct {
	common *api.CommonUpdateSettings
	verify *api.ImagesVerification
	gate   *api.HealthGate
	at     Origin
}

// ParseImageUpdater reads the settings the applicationRef i of an
// ImageUpdater gives the Applications it selects: images[] with each
// setting taken from the most specific level that sets it (image, then
// ref, then spec); image names are read with opts. Bad values are problems
// that disable only what they concern, as with annotations.
func ParseImageUpdater(iu *api.ImageUpdater, i int, opts ...imageref.Option) Settings {
	var a Settings
	spec := FieldOrigin(types.NamespacedName{Namespace: iu.Namespace, Name: iu.Name}, "spec")
	ref := iu.Spec.ApplicationRefs[i]
	refAt := spec.Child(".applicationRefs[%d]", i)
	a.WriteBack = writeBack(
		[]*api.WriteBackConfig{ref.WriteBackConfig, iu.Spec.WriteBackConfig},
		[]Origin{refAt.Child(".writeBackConfig"), spec.Child(".writeBackConfig")},
		&a.Problems)
	for _, hold := range []*bool{ref.RollbackHold, iu.Spec.RollbackHold} {
		if hold != nil {
			a.RollbackHoldOff = !*hold
			break
		}
	}
	for _, use := range []*bool{ref.UseSyncWindows, iu.Spec.UseSyncWindows} {
		if use != nil {
			a.UseSyncWindows = *use
			break
		}
	}
	switch {
	case ref.UpdateWindows != nil:
		a.resourceWindows(ref.UpdateWindows, refAt.Child(".updateWindows"))
	case iu.Spec.UpdateWindows != nil:
		a.resourceWindows(iu.Spec.UpdateWindows, spec.Child(".updateWindows"))
	}

	levels := []level{
		{common: ref.CommonUpdateSettings, verify: ref.ImagesVerification, gate: ref.HealthGate, at: refAt},
		{common: iu.Spec.CommonUpdateSettings, verify: iu.Spec.ImagesVerification, gate: iu.Spec.HealthGate, at: spec},
	}
	if p, ok := tooManyImages(len(ref.Images), refAt.Child(".images")); !ok {
		a.Problems = append(a.Problems, p)
		return a
	}
	for j, img := range ref.Images {
		imgAt := refAt.Child(".images[%d]", j)
		all := append([]level{{common: img.CommonUpdateSettings, verify: img.ImagesVerification, gate: img.HealthGate, at: imgAt}}, levels...)
		if s, ok := imageConfig(img, imgAt, all, opts, &a.Problems); ok {
			a.Images = append(a.Images, s)
		}
	}
	a.Charts = chartConfigs(ref, refAt, levels, &a.Problems)
	if len(ref.GitTags) > 0 {
		aliases := map[string]bool{}
		for _, img := range ref.Images {
			aliases[img.Alias] = true
		}
		for _, c := range ref.Charts {
			aliases[c.Alias] = true
		}
		a.Charts = append(a.Charts, gitTagConfigs(ref, refAt, levels, aliases, &a.Problems)...)
	}
	return a
}

// resourceWindows sets the Application's windows from an ImageUpdater's
// list at at; one not understood writes nothing.
func (a *Settings) resourceWindows(list []api.UpdateWindow, at Origin) {
	if len(list) > window.MaxWindows {
		a.Problems = append(a.Problems, Problem{Origin: at, Message: fmt.Sprintf("%d windows, more than %d; nothing is written", len(list), window.MaxWindows)})
		a.WindowsInvalid = true
		return
	}
	var set window.Set
	for i, w := range list {
		parsed, err := window.New(w.Kind, w.Schedule, w.Duration, w.TimeZone)
		if err != nil {
			a.Problems = append(a.Problems, Problem{Origin: at.Child("[%d]", i), Message: err.Error() + "; nothing is written"})
			a.WindowsInvalid = true
			return
		}
		set = append(set, parsed)
	}
	a.Windows, a.WindowsOrigin = set, at
}

// chartConfigs reads an applicationRef's charts; their settings are
// their own, as the chart-list annotation's are.
func chartConfigs(ref api.ApplicationRef, refAt Origin, levels []level, problems *[]Problem) []ChartSpec {
	if len(ref.Charts) > MaxCharts {
		*problems = append(*problems, Problem{Chart: true, Origin: refAt.Child(".charts"), Message: fmt.Sprintf("%d charts, more than the %d one Application may have; none of its charts is updated", len(ref.Charts), MaxCharts)})
		return nil
	}
	aliases := map[string]bool{}
	for _, img := range ref.Images {
		aliases[img.Alias] = true
	}
	charts := []ChartSpec{}
	seen := map[string]bool{}
	for j, c := range ref.Charts {
		at := refAt.Child(".charts[%d]", j)
		spec, err := ParseChart(strings.TrimSpace(c.ChartName))
		spec.Alias, spec.Origin = c.Alias, at.Child(".chartName")
		switch {
		case err != nil:
		case c.Alias == "":
			err = errors.New("a chart needs an alias")
		case aliases[c.Alias]:
			err = fmt.Errorf("alias %q is used twice; aliases must be unique among the ref's images and charts", c.Alias)
		case seen[spec.Chart]:
			err = fmt.Errorf("chart %s is listed twice", spec.Chart)
		}
		if err != nil {
			*problems = append(*problems, Problem{Image: c.Alias, Chart: true, Origin: spec.Origin, Message: err.Error()})
			continue
		}
		aliases[c.Alias], seen[spec.Chart] = true, true
		if refEntryPolicy(&spec, at, spec.Origin, c.UpdateStrategy, c.AllowTags, c.IgnoreTags, levels, problems) {
			charts = append(charts, spec)
		}
	}
	if len(charts) == 0 {
		return nil
	}
	return charts
}

// refEntryPolicy compiles the policy of an ImageUpdater's chart or git
// repository at at from its own fields (constraintAt where its constraint
// is written), and its minimum release age from the ref's and the spec's
// minimumReleaseAge, which hold for them as for images; false when either
// is bad, told in problems.
func refEntryPolicy(spec *ChartSpec, at, constraintAt Origin, updateStrategy, allowTags *string, ignoreTags []string, levels []level, problems *[]Problem) bool {
	raw := policySettings{constraintAt: constraintAt, Settings: strategy.Settings{IgnoreTags: ignoreTags}}
	raw.strategyAt, raw.allowTagsAt, raw.ignoreTagsAt = at.Child(".updateStrategy"), at.Child(".allowTags"), at.Child(".ignoreTags")
	if updateStrategy != nil {
		raw.Strategy = *updateStrategy
	}
	if allowTags != nil {
		raw.AllowTags = *allowTags
	}
	if p, ok := compileChartPolicy(spec, raw); !ok {
		*problems = append(*problems, p)
		return false
	}
	if v, at := mostSpecific(levels, "minimumReleaseAge", func(c *api.CommonUpdateSettings) *string { return c.MinimumReleaseAge }); v != nil {
		d, err := ParseReleaseAge(*v)
		if err != nil {
			*problems = append(*problems, Problem{Image: spec.Alias, Chart: true, GitTag: spec.GitTag, Origin: at, Message: err.Error()})
			return false
		}
		spec.MinReleaseAge, spec.MinReleaseAgeOrigin = d, at
	}
	return true
}

func imageConfig(img api.ImageConfig, at Origin, levels []level, opts []imageref.Option, problems *[]Problem) (ImageSpec, bool) {
	ok := true
	fail := func(at Origin, format string, args ...any) {
		*problems = append(*problems, Problem{Image: img.Alias, Origin: at, Message: fmt.Sprintf(format, args...)})
		ok = false
	}
	s, err := ParseImage(strings.TrimSpace(img.ImageName), opts...)
	if err != nil {
		fail(at.Child(".imageName"), "%v", err)
		return s, false
	}
	s.Alias = img.Alias

	// Each setting from the most specific level that sets it.
	raw := policySettings{constraintAt: at.Child(".imageName")}
	pullSecret := ""
	for _, l := range levels {
		c := l.common
		if c == nil {
			continue
		}
		cat := l.at.Child(".commonUpdateSettings")
		if raw.Strategy == "" && c.UpdateStrategy != nil {
			raw.Strategy, raw.strategyAt = *c.UpdateStrategy, cat.Child(".updateStrategy")
		}
		if raw.AllowTags == "" && c.AllowTags != nil {
			raw.AllowTags, raw.allowTagsAt = *c.AllowTags, cat.Child(".allowTags")
		}
		if raw.IgnoreTags == nil && c.IgnoreTags != nil {
			raw.IgnoreTags, raw.ignoreTagsAt = c.IgnoreTags, cat.Child(".ignoreTags")
		}
		if pullSecret == "" && c.PullSecret != nil && *c.PullSecret != "" {
			pullSecret = *c.PullSecret
			if p, good := readPullSecret(&s, pullSecret, cat.Child(".pullSecret")); !good {
				*problems = append(*problems, p)
				ok = false
			}
		}
		if s.Platforms == nil && c.Platforms != nil {
			ps, err := platform.Parse(strings.Join(c.Platforms, ","))
			if err != nil {
				fail(cat.Child(".platforms"), "%v", err)
			}
			if ps == nil {
				ps = []v1.Platform{}
			}
			s.Platforms = ps
		}
	}
	s.ForceUpdate = forceUpdate(levels)
	if v, at := mostSpecific(levels, "minimumReleaseAge", func(c *api.CommonUpdateSettings) *string { return c.MinimumReleaseAge }); v != nil {
		d, err := ParseReleaseAge(*v)
		if err != nil {
			fail(at, "%v", err)
		}
		s.MinReleaseAge, s.MinReleaseAgeOrigin = d, at
	}
	if v, at := mostSpecific(levels, "promoteFrom", func(c *api.CommonUpdateSettings) *api.PromoteFrom { return c.PromoteFrom }); v != nil {
		st, err := ParseStage(v.Application, v.SoakTime)
		if err != nil {
			fail(at, "%v", err)
		}
		st.Origin = at
		s.PromoteFrom = st
	}
	if v, at := mostSpecific(levels, "pinDigest", func(c *api.CommonUpdateSettings) *string { return c.PinDigest }); v != nil {
		p, err := ParseDigestPin(*v)
		if err != nil {
			fail(at, "%v", err)
		}
		s.PinDigest, s.PinDigestOrigin = p, at
	}
	if p, good := compilePolicy(&s, raw); !good {
		*problems = append(*problems, p)
		ok = false
	}
	for _, l := range levels {
		if l.verify == nil {
			continue
		}
		if l.verify.Enabled != nil && !*l.verify.Enabled {
			break
		}
		vat := l.at.Child(".imagesVerification")
		if kl := l.verify.Keyless; kl != nil && l.verify.CosignKey == nil {
			id := KeylessIdentity{Subject: kl.CertificateIdentity, SubjectRegexp: kl.CertificateIdentityRegexp, Issuer: kl.CertificateOIDCIssuer, IssuerRegexp: kl.CertificateOIDCIssuerRegexp}
			if err := id.Check(); err != nil {
				fail(vat.Child(".keyless"), "%v", err)
				break
			}
			s.SignatureKey = SignatureKey{Keyless: &id, Origin: vat.Child(".keyless")}
			break
		}
		k := l.verify.CosignKey
		if k == nil || k.SecretName == "" || l.verify.Keyless != nil {
			// Fail closed: whoever asked for verified images must not
			// get unverified ones.
			fail(vat, "verification is enabled and names no key or names two: set cosignKey.secretName or keyless, or enabled: false")
			break
		}
		s.SignatureKey = SignatureKey{Name: k.SecretName, Field: k.Key, Origin: vat.Child(".cosignKey")}
		if s.SignatureKey.Field == "" {
			s.SignatureKey.Field = DefaultCosignKeyField
		}
		break
	}

	if p, good := healthGate(&s, levels); !good {
		*problems = append(*problems, p)
		ok = false
	}

	if t := img.ManifestTarget; t != nil {
		tat := at.Child(".manifestTargets")
		switch {
		case t.Helm != nil:
			s.HelmImageName, s.HelmImageTag, s.HelmImageSpec = deref(t.Helm.Name), deref(t.Helm.Tag), deref(t.Helm.Spec)
			s.HelmImageDigest = deref(t.Helm.Digest)
		case t.Kustomize != nil && deref(t.Kustomize.Name) != "":
			ref, err := imageref.Parse(deref(t.Kustomize.Name), opts...)
			if err != nil {
				fail(tat.Child(".kustomize.name"), "%v", err)
			}
			s.KustomizeImageName = ref
		case t.Plugin != nil:
			s.PluginEnvName, s.PluginEnvTag, s.PluginEnvSpec = deref(t.Plugin.Name), deref(t.Plugin.Tag), deref(t.Plugin.Spec)
		}
	}
	return s, ok
}

// mostSpecific is the commonUpdateSettings field of the most specific
// level that sets it, with where it is written; nil when none does.
func mostSpecific[T any](levels []level, name string, field func(*api.CommonUpdateSettings) *T) (*T, Origin) {
	for _, l := range levels {
		if l.common == nil {
			continue
		}
		if v := field(l.common); v != nil {
			return v, l.at.Child(".commonUpdateSettings.%s", name)
		}
	}
	return nil, ""
}

// healthGate sets s's health gate from the most specific level with a
// healthGate block, which gives the whole setting.
func healthGate(s *ImageSpec, levels []level) (Problem, bool) {
	for _, l := range levels {
		g := l.gate
		if g == nil {
			continue
		}
		at := l.at.Child(".healthGate")
		if g.Enabled != nil && !*g.Enabled {
			return Problem{}, true
		}
		s.HealthGate, s.HealthGateOrigin = DefaultHealthGateWindow, at
		if g.Window == nil || *g.Window == "" {
			return Problem{}, true
		}
		d, err := parseWindow(*g.Window)
		if err != nil {
			return Problem{Image: s.Key(), Origin: at.Child(".window"), Message: err.Error()}, false
		}
		s.HealthGate, s.HealthGateOrigin = d, at.Child(".window")
		return Problem{}, true
	}
	return Problem{}, true
}

func forceUpdate(levels []level) bool {
	for _, l := range levels {
		if l.common != nil && l.common.ForceUpdate != nil {
			return *l.common.ForceUpdate
		}
	}
	return false
}

// writeBack reads the write-back settings of levels, most specific first,
// each setting from the first level that sets it.
func writeBack(levels []*api.WriteBackConfig, at []Origin, problems *[]Problem) WriteBack {
	var wb WriteBack
	var method, target string
	var targetAt Origin
	var pr Origin
	var kind Forge
	for i, l := range levels {
		if l == nil {
			continue
		}
		if method == "" && l.Method != nil {
			method, wb.MethodOrigin = *l.Method, at[i].Child(".method")
		}
		g := l.GitConfig
		if g == nil {
			continue
		}
		gat := at[i].Child(".gitConfig")
		if wb.GitRepository == "" && g.Repository != nil {
			wb.GitRepository = *g.Repository
		}
		if wb.GitBranch == "" && g.Branch != nil {
			wb.GitBranch = *g.Branch
		}
		if target == "" && g.WriteBackTarget != nil {
			target, targetAt = *g.WriteBackTarget, gat.Child(".writeBackTarget")
		}
		if pr == "" && g.PullRequest != nil {
			pr = gat.Child(".pullRequest")
			kind = pullRequestKind(g.PullRequest)
			wb.PullRequestLabels = g.PullRequest.Labels
		}
	}
	// Unset, the method is argocd, which the most general level would say.
	wb.MethodOrigin = wb.MethodOrigin.Or(at[len(at)-1].Child(".method"))
	var err error
	if wb.Method, wb.GitSecret, err = ParseWriteBackMethod(method); err != nil {
		*problems = append(*problems, Problem{Origin: wb.MethodOrigin, Message: err.Error()})
	}
	if wb.Target, err = ParseWriteBackTarget(target); err != nil {
		*problems = append(*problems, Problem{Origin: targetAt, Message: err.Error()})
	}
	if pr != "" && wb.Method == WriteBackGit {
		wb.PullRequest = kind
		if len(wb.PullRequestLabels) > 0 && !kind.Labels() {
			*problems = append(*problems, Problem{Origin: pr.Child(".labels"), Warning: true,
				Message: fmt.Sprintf("ignored: %s pull requests have no labels", kind)})
			wb.PullRequestLabels = nil
		}
		if !strings.Contains(wb.GitBranch, ":") {
			// As v1.3.0: branch is the request's base, and the request
			// comes from a branch of its own per target and change.
			wb.GitBranch += ":" + PullRequestBranch
		}
	} else {
		wb.PullRequestLabels = nil
	}
	return wb
}

// pullRequestKind is the service a pullRequest names; the CRD lets
// exactly one be set.
func pullRequestKind(p *api.PullRequestConfig) Forge {
	switch {
	case p.GitHub != nil:
		return ForgeGitHub
	case p.Gitea != nil:
		return ForgeGitea
	case p.Bitbucket != nil:
		return ForgeBitbucket
	case p.BitbucketServer != nil:
		return ForgeBitbucketServer
	case p.AzureDevOps != nil:
		return ForgeAzureDevOps
	}
	return ForgeGitLab
}

// PullRequestBranch is the branch a pull request of an ImageUpdater comes
// from when gitConfig.branch names only its base, as v1.3.0 names it: one
// per write-back target and set of changes.
const PullRequestBranch = "image-updater-{{.TargetKey}}-{{.SHA256}}"

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
