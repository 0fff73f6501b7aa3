package docs

// Every example in the documentation is checked here. Each fenced code block
// of docs/*.md and README.md carries a language and, for most, a tag after it
// (```yaml registries.conf). The tag says what the block is and how it is
// checked:
//
//	yaml registries.conf          config.Parse accepts it
//	yaml registries.conf error    config.Parse rejects it; the next
//	                              block must be "text error", each line of
//	                              which occurs in the error message
//	yaml application              an Argo CD Application: one update cycle
//	                              over it (registry and git repositories
//	                              without tags, events recorded) reports
//	                              no problem at all
//	yaml application warning      the cycle reports warnings, no error
//	yaml application error        the cycle reports at least one error
//	                              (after an application block, an optional
//	                              "text events" block lists events that must
//	                              be recorded, one per line; a git-branch
//	                              template must render to a branch name)
//	yaml imageupdater             ImageUpdater resources (every field known
//	                              to api/v1alpha1) and the Applications
//	                              they select: one update cycle over them
//	                              reports no problem at all
//	yaml imageupdater warning     the cycle reports warnings, no error
//	yaml imageupdater error       the cycle reports at least one error
//	                              (with an optional "text events" block,
//	                              as for applications)
//	yaml manifest                 Kubernetes objects: every document has
//	                              apiVersion, kind and metadata.name
//	yaml kustomization            a kustomization or a patch: valid YAML
//	yaml parent-values            an app-of-apps parent's values file with
//	                              markers: the sample child argocd/web
//	                              (image app to v0.0.2, chart web to
//	                              1.1.0) is written into it by
//	                              manifest.SetApplicationMarkers, which
//	                              finds both; the next block must be
//	                              "text written", equal to the result
//	yaml values                   values for the Helm chart: every key it
//	                              sets is a value of charts/argocd-image-
//	                              updater/values.yaml (below a map that is
//	                              empty there, such as annotations, any key)
//	sh                            every command line that runs
//	                              argocd-image-updater is run with --help
//	                              appended, must succeed, and each --flag it
//	                              gives must be listed by that help; kubectl
//	                              lines must name files that exist (-f,
//	                              -k, --patch-file)
//	json                          valid JSON
//	json notice                   an annotation of notice: notice.Decode
//	                              reads it, and Encode gives it back as is
//	gotemplate commit-message     git.ParseCommitMessageTemplate and
//	                              Render with SampleCommitMessageData succeed;
//	                              an optional next "text rendered" block must
//	                              equal the output
//	gotemplate pull-request       git.ParsePullRequestTemplate and
//	                              Render with SamplePullRequestData
//	                              succeed; an optional next "text
//	                              rendered" block must equal the title, a
//	                              blank line and the description
//	json webhook TYPE             a registry's notification: sent to the
//	                              webhook handler as that registry type
//	                              sends it, with the secret it is set up
//	                              with, it is accepted; an optional next
//	                              "text repositories" block lists the
//	                              repositories it names, one per line
//	yaml distribution-config      the notifications section of a
//	                              Distribution registry's configuration:
//	                              each endpoint has a name and a url that
//	                              reaches /webhook with type=distribution
//	text                          output shown as is: not checked
//
// A block with another language or tag fails the test, and so does an
// expectation block (text error, text events, text rendered) that follows
// no block it could belong to.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/yaml"

	imageupdaterv1alpha1 "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/chartrepo"
	"github.com/image-updater/argocd-image-updater/cycle"
	"github.com/image-updater/argocd-image-updater/healthgate"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/imageupdater"
	"github.com/image-updater/argocd-image-updater/notice"
	"github.com/image-updater/argocd-image-updater/registry"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/repoaccess"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/signature"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/appset"
	"github.com/image-updater/argocd-image-updater/writeback/git"
	"github.com/image-updater/argocd-image-updater/writeback/manifest"
)

// block is one fenced code block of a Markdown file.
type block struct {
	file string
	line int // of the opening fence, 1-based
	lang string
	tags string // the info string after the language, space-normalised
	body string
}

func (b block) String() string {
	return fmt.Sprintf("%s:%d (```%s %s)", b.file, b.line, b.lang, b.tags)
}

var fenceRE = regexp.MustCompile("^([ \t]*)(```+|~~~+)[ \t]*(.*)$")

// extractBlocks returns the fenced code blocks of a Markdown text. Fences
// may be indented (inside list items); the indentation is removed from the
// block's lines.
func extractBlocks(file, text string) ([]block, error) {
	var blocks []block
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, fence, info := m[1], m[2], strings.Fields(m[3])
		b := block{file: file, line: i + 1}
		if len(info) > 0 {
			b.lang, b.tags = info[0], strings.Join(info[1:], " ")
		}
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			l := lines[i]
			trimmed := strings.TrimSpace(l)
			if strings.HasPrefix(trimmed, fence[:1]) && strings.Trim(trimmed, fence[:1]) == "" && len(trimmed) >= len(fence) {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(l, indent))
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: code block is not closed", file, b.line)
		}
		b.body = strings.Join(body, "\n")
		if len(body) > 0 {
			b.body += "\n"
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// markdownFiles are the files whose examples are checked, relative to the
// docs folder.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Markdown files in docs/")
	}
	sort.Strings(files)
	return append(files, filepath.Join("..", "README.md"))
}

func TestExamples(t *testing.T) {
	var sh shellChecker
	defer sh.cleanup()
	total := 0
	for _, file := range markdownFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := extractBlocks(file, string(data))
		if err != nil {
			t.Error(err)
			continue
		}
		total += len(blocks)
		t.Run(filepath.Base(file), func(t *testing.T) {
			checkBlocks(t, blocks, &sh)
		})
	}
	if total == 0 {
		t.Fatal("no code blocks found")
	}
}

// checkBlocks checks the blocks of one file in order; expectation blocks are
// consumed by the block before them.
func checkBlocks(t *testing.T, blocks []block, sh *shellChecker) {
	next := func(i int, tag string) (block, bool) {
		if i+1 < len(blocks) && blocks[i+1].lang == "text" && blocks[i+1].tags == tag {
			return blocks[i+1], true
		}
		return block{}, false
	}
	for i := 0; i < len(blocks); i++ {
		b := blocks[i]
		var err error
		switch kind := b.lang + " " + b.tags; strings.TrimSpace(kind) {
		case "yaml registries.conf":
			err = checkRegistriesConf(b)
		case "yaml registries.conf error":
			exp, ok := next(i, "error")
			if !ok {
				err = errors.New(`a registries.conf error example must be followed by a "text error" block`)
				break
			}
			i++
			err = checkRegistriesConfError(b, exp)
		case "yaml application", "yaml application warning", "yaml application error":
			exp, ok := next(i, "events")
			if ok {
				i++
			}
			err = checkApplication(b, strings.TrimPrefix(b.tags, "application"), exp, ok)
		case "yaml imageupdater", "yaml imageupdater warning", "yaml imageupdater error":
			exp, ok := next(i, "events")
			if ok {
				i++
			}
			err = checkImageUpdater(b, strings.TrimPrefix(b.tags, "imageupdater"), exp, ok)
		case "yaml manifest":
			err = checkManifest(b)
		case "yaml kustomization":
			err = checkYAMLDocuments(b)
		case "yaml applicationset":
			err = checkApplicationSet(b)
		case "yaml values":
			err = checkHelmValues(b)
		case "yaml parent-values":
			exp, ok := next(i, "written")
			if !ok {
				err = errors.New(`a parent-values example must be followed by a "text written" block`)
				break
			}
			i++
			err = checkParentValues(b, exp)
		case "yaml marked":
			exp, ok := next(i, "written")
			if !ok {
				err = errors.New(`a marked example must be followed by a "text written" block`)
				break
			}
			i++
			err = checkMarked(b, exp)
		case "json":
			if !json.Valid([]byte(b.body)) {
				err = errors.New("invalid JSON")
			}
		case "json notice":
			err = checkNotice(b)
		case "sh":
			err = sh.check(b)
		case "gotemplate commit-message":
			exp, ok := next(i, "rendered")
			if ok {
				i++
			}
			err = checkCommitMessage(b, exp, ok)
		case "gotemplate pull-request":
			exp, ok := next(i, "rendered")
			if ok {
				i++
			}
			err = checkPullRequest(b, exp, ok)
		case "text":
			// Output shown as is.
		case "yaml distribution-config":
			err = checkDistributionConfig(b)
		case "text error", "text events", "text rendered", "text repositories", "text written":
			err = errors.New("expectation block follows no block it belongs to")
		default:
			if source, ok := strings.CutPrefix(strings.TrimSpace(kind), "json webhook "); ok {
				exp, hasExp := next(i, "repositories")
				if hasExp {
					i++
				}
				err = checkWebhookPayload(source, b, exp, hasExp)
				break
			}
			err = errors.New("unknown language or tag; see docs_test.go for the tags")
		}
		if err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
}

// expectedLines are the non-empty lines of an expectation block.
func expectedLines(b block) []string {
	var out []string
	for _, l := range strings.Split(b.body, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// registriesConfName is the file name the examples' errors mention.
const registriesConfName = "registries.conf"

func checkRegistriesConf(b block) error {
	if _, err := config.Parse(registriesConfName, []byte(b.body)); err != nil {
		return err
	}
	var doc struct {
		Registries []any `json:"registries"`
	}
	if err := yaml.Unmarshal([]byte(b.body), &doc); err != nil {
		return err
	}
	if len(doc.Registries) == 0 && strings.TrimSpace(b.body) != "" && !strings.Contains(b.body, "registries: []") {
		return errors.New("the example defines no registry")
	}
	return nil
}

func checkRegistriesConfError(b, exp block) error {
	_, err := config.Parse(registriesConfName, []byte(b.body))
	if err == nil {
		return errors.New("config.Parse accepted an example shown as an error")
	}
	lines := expectedLines(exp)
	if len(lines) == 0 {
		return errors.New("the text error block is empty")
	}
	for _, l := range lines {
		if !strings.Contains(err.Error(), l) {
			return fmt.Errorf("the error message lacks %q; it is:\n%v", l, err)
		}
	}
	return nil
}

// The cycle runs against a registry with no tags and a writer that is never
// reached (no tags means no update), so what it reports is what the
// Application's settings alone cause.
type staticApps []*application.Application

func (a staticApps) Applications(...imageref.Option) []*application.Application { return a }

type emptyRegistry struct{}

func (emptyRegistry) Tags(context.Context, imageref.Reference, credref.Ref) ([]string, error) {
	return nil, nil
}

func (emptyRegistry) ForgetTags(imageref.Reference) {}
func (emptyRegistry) PushTimes(context.Context, imageref.Reference, credref.Ref, []string) (map[string]time.Time, error) {
	return nil, registry.ErrNoPushTimes
}

func (emptyRegistry) Metadata(context.Context, imageref.Reference, credref.Ref, []v1.Platform, ...registry.MetadataOption) (registry.ImageMetadata, error) {
	return registry.ImageMetadata{}, errors.New("docs test: no metadata")
}

func (emptyRegistry) Endpoint(imageref.Reference) config.Endpoint { return config.Endpoint{} }

func (emptyRegistry) Manifest(context.Context, imageref.Reference, credref.Ref) (registry.Manifest, error) {
	return registry.Manifest{}, registry.ErrNotFound
}

func (emptyRegistry) Blob(context.Context, imageref.Reference, credref.Ref, string, int64) ([]byte, error) {
	return nil, registry.ErrNotFound
}

func (emptyRegistry) Referrers(context.Context, imageref.Reference, credref.Ref, string) (registry.Manifest, error) {
	return registry.Manifest{Body: []byte(`{"schemaVersion":2,"manifests":[]}`)}, nil
}

// docSecrets holds, in every Secret the examples name, a public key in
// every field: the examples' signature keys are then readable.
// docCharts are HTTP Helm repositories whose indexes list no versions,
// read under the rules of the controller: Argo CD's namespace holds no
// repository Secrets, and every AppProject permits every repository.
type docCharts struct{ *chartrepo.Client }

func (docCharts) Index(context.Context, chartrepo.Access, []string) (chartrepo.Index, error) {
	return chartrepo.Index{}, nil
}

// docGitTags is a git server whose repositories have no tags, as the
// registry of the examples has none.
type docGitTags struct{}

func (docGitTags) Tags(context.Context, string, string, string) ([]string, error) { return nil, nil }

type docRepoSecrets struct{}

func (docRepoSecrets) RepositorySecrets(context.Context, string) ([]corev1.Secret, error) {
	return nil, nil
}
func (docRepoSecrets) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}
func (docRepoSecrets) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

type docProjects struct{}

func (docProjects) AppProject(context.Context, string, string) (*repoaccess.AppProject, error) {
	return &repoaccess.AppProject{SourceRepos: []string{"*"}}, nil
}

type docSecrets struct{}

var docKey = func() []byte {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}()

func (docSecrets) GetSecret(context.Context, string, string) (map[string][]byte, error) {
	return map[string][]byte{"cosign.pub": docKey}, nil
}

type refusingWriter struct{}

func (refusingWriter) Write(_ context.Context, changes []writeback.Change) []writeback.Result {
	results := make([]writeback.Result, len(changes))
	for i := range results {
		results[i].Err = errors.New("docs test: nothing should be written")
	}
	return results
}

func (refusingWriter) Refresh(context.Context, string, string, map[string]string) error {
	return errors.New("docs test: nothing should be refreshed")
}

// splitYAML splits a multi-document YAML text.
func splitYAML(body string) []string {
	var docs []string
	for _, d := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(body, -1) {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

func checkApplication(b block, want string, exp block, hasExp bool) error {
	var apps staticApps
	for _, doc := range splitYAML(b.body) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return fmt.Errorf("invalid YAML: %w", err)
		}
		if obj.GetAPIVersion() != "argoproj.io/v1alpha1" || obj.GetKind() != "Application" {
			return fmt.Errorf("not an Argo CD Application: apiVersion %q, kind %q", obj.GetAPIVersion(), obj.GetKind())
		}
		if obj.GetName() == "" || obj.GetNamespace() == "" {
			return errors.New("metadata.name and metadata.namespace are required in examples")
		}
		if !settings.Managed(obj.GetAnnotations()) {
			return errors.New("the Application has neither an image-list nor a chart-list annotation")
		}
		if v, ok := obj.GetAnnotations()[healthgate.StateAnnotation]; ok {
			// The health gate's state, as it reads it back.
			if _, err := healthgate.ParseState(v); err != nil {
				return fmt.Errorf("%s: %w", healthgate.StateAnnotation, err)
			}
		}
		app, err := application.FromUnstructured(obj)
		if err != nil {
			return err
		}
		if err := checkBranchTemplate(app.Settings.WriteBack.GitBranch); err != nil {
			return err
		}
		apps = append(apps, app)
	}
	if len(apps) == 0 {
		return errors.New("no Application in the block")
	}
	return runCycle(apps, want, exp, hasExp)
}

// docTrustedRoot is a Sigstore trusted root, as the operator of the
// examples gives the controller for keyless signatures.
var docTrustedRoot = sync.OnceValue(func() *signature.TrustedRoot {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		panic(err)
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), nil, vs.TimestampingAuthorities(), nil)
	if err != nil {
		panic(err)
	}
	data, err := tr.MarshalJSON()
	if err != nil {
		panic(err)
	}
	r, err := signature.ParseTrustedRoot(data)
	if err != nil {
		panic(err)
	}
	return r
})

// runCycle runs one update cycle over apps (a registry without tags, no
// write) and checks what it reports against want ("", "warning" or
// "error") and the optional events block.
func runCycle(apps cycle.Applications, want string, exp block, hasExp bool) error {
	want = strings.TrimSpace(want)
	recorder := record.NewFakeRecorder(1000)
	u, err := cycle.New(apps, emptyRegistry{}, refusingWriter{},
		cycle.WithEvents(cycle.NewEventReporter(recorder)),
		cycle.WithControllerNamespace("argocd"),
		cycle.WithSignatures(signature.NewVerifier(emptyRegistry{}), docSecrets{}, docTrustedRoot()),
		cycle.WithDefaultPlatforms(v1.Platform{OS: "linux", Architecture: "amd64"}),
		cycle.WithChartRepositories(docCharts{chartrepo.NewClient(docRepoSecrets{}, docProjects{}, "argocd")}),
		cycle.WithGitTags(docGitTags{}))
	if err != nil {
		return err
	}
	sum := u.RunOnce(context.Background())
	close(recorder.Events)
	var events []string
	for e := range recorder.Events {
		events = append(events, e)
	}
	all := strings.Join(events, "\n")

	switch want {
	case "":
		if sum.Errors > 0 || len(events) > 0 {
			return fmt.Errorf("the example is shown as valid, but the cycle reported %d error(s) and these events:\n%s", sum.Errors, all)
		}
	case "warning":
		if sum.Errors > 0 || len(events) == 0 {
			return fmt.Errorf("the example is shown with warnings only, but the cycle reported %d error(s) and these events:\n%s", sum.Errors, all)
		}
	case "error":
		if sum.Errors == 0 {
			return fmt.Errorf("the example is shown as an error, but the cycle reported none; events:\n%s", all)
		}
	}
	if hasExp {
		lines := expectedLines(exp)
		if len(lines) == 0 {
			return errors.New("the text events block is empty")
		}
		for _, l := range lines {
			if !strings.Contains(all, l) {
				return fmt.Errorf("no recorded event contains %q; the events are:\n%s", l, all)
			}
		}
	}
	return nil
}

// checkImageUpdater checks a block of ImageUpdaters and the Applications
// they select, read strictly: a field the resource does not have fails.
func checkImageUpdater(b block, want string, exp block, hasExp bool) error {
	var resources []*imageupdaterv1alpha1.ImageUpdater
	var apps staticObjects
	for _, doc := range splitYAML(b.body) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return fmt.Errorf("invalid YAML: %w", err)
		}
		if obj.GetName() == "" || obj.GetNamespace() == "" {
			return errors.New("metadata.name and metadata.namespace are required in examples")
		}
		switch obj.GroupVersionKind() {
		case imageupdaterv1alpha1.GroupVersion.WithKind("ImageUpdater"):
			iu := &imageupdaterv1alpha1.ImageUpdater{}
			if err := yaml.UnmarshalStrict([]byte(doc), iu); err != nil {
				return fmt.Errorf("ImageUpdater %s: %w", obj.GetName(), err)
			}
			if len(iu.Spec.ApplicationRefs) == 0 {
				return fmt.Errorf("ImageUpdater %s: spec.applicationRefs is required", obj.GetName())
			}
			resources = append(resources, iu)
		case argoApplication:
			apps = append(apps, application.SnapshotOf(obj))
		default:
			return fmt.Errorf("neither an ImageUpdater nor an Application: apiVersion %q, kind %q", obj.GetAPIVersion(), obj.GetKind())
		}
	}
	if len(resources) == 0 {
		return errors.New("no ImageUpdater in the block")
	}
	selected, errs := imageupdater.Select(resources, apps)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(selected) == 0 {
		return errors.New("the ImageUpdaters select no Application of the block")
	}
	return runCycle(staticApps(selected), want, exp, hasExp)
}

var argoApplication = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// staticObjects are the Applications of an example, as a watcher of them
// would give them to imageupdater.Select.
type staticObjects []*application.Snapshot

func (o staticObjects) Applications(opts ...imageref.Option) []*application.Application {
	var apps []*application.Application
	for _, obj := range o {
		if !obj.Managed() {
			continue
		}
		if app, err := obj.Application(opts...); err == nil {
			apps = append(apps, app)
		}
	}
	return apps
}

func (o staticObjects) InNamespace(ns string) []*application.Snapshot {
	var out []*application.Snapshot
	for _, obj := range o {
		if obj.Namespace() == ns {
			out = append(out, obj)
		}
	}
	return out
}

// checkBranchTemplate renders the target part of a git-branch annotation
// ("base:target") with data shaped like what the git writer gives it:
// .Images with .Name .Alias .OldTag .NewTag, and .SHA256.
func checkBranchTemplate(spec string) error {
	_, target, ok := strings.Cut(spec, ":")
	if !ok {
		return nil
	}
	type image struct{ Name, Alias, OldTag, NewTag string }
	data := struct {
		Images []image
		SHA256 string
	}{
		Images: []image{{Name: "ghcr.io/example/web", Alias: "web", OldTag: "1.4.0", NewTag: "1.5.0"}},
		SHA256: strings.Repeat("0123456789abcdef", 4),
	}
	tmpl, err := template.New("git-branch").Option("missingkey=error").Parse(target)
	if err != nil {
		return fmt.Errorf("git-branch: %w", err)
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, data); err != nil {
		return fmt.Errorf("git-branch: %w", err)
	}
	if strings.TrimSpace(out.String()) == "" || strings.ContainsAny(out.String(), " ~^:?*[\\") {
		return fmt.Errorf("git-branch: %q is not a branch name", out.String())
	}
	return nil
}

// checkApplicationSet reads an ApplicationSet as the applicationset
// write-back target does: each list element renders a name of its own,
// and the template's annotations choose that target.
func checkApplicationSet(b block) error {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(b.body), &obj); err != nil {
		return fmt.Errorf("invalid YAML: %w", err)
	}
	s, err := appset.FromObject(obj)
	if err != nil {
		return err
	}
	meta, _ := s.Template["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations[settings.AnnotationPrefix+settings.KeyWriteBackTarget] != string(settings.TargetApplicationSet) {
		return errors.New("the template's annotations do not choose write-back-target applicationset")
	}
	seen := map[string]bool{}
	for _, g := range s.Generators {
		for i, e := range g.Elements {
			name, err := s.Render(meta["name"].(string), appset.ListParams(e))
			if err != nil {
				return err
			}
			if ok, _ := s.Generates(appset.ListParams(e), name); !ok || strings.Contains(name, "{{") || seen[name] {
				return fmt.Errorf("element %d renders the name %q, which is not an Application's of its own", i, name)
			}
			seen[name] = true
		}
	}
	if len(seen) == 0 {
		return errors.New("no list element")
	}
	return nil
}

func checkYAMLDocuments(b block) error {
	docs := splitYAML(b.body)
	if len(docs) == 0 {
		return errors.New("empty YAML block")
	}
	for _, doc := range docs {
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			return fmt.Errorf("invalid YAML: %w", err)
		}
		if _, ok := v.(map[string]any); !ok {
			return errors.New("the YAML document is not a map")
		}
	}
	return nil
}

func checkNotice(b block) error {
	value := strings.TrimSpace(b.body)
	n, err := notice.Decode(value)
	if err != nil {
		return err
	}
	if got := n.Encode(); got != value {
		return fmt.Errorf("not as the updater writes it; it writes:\n%s", got)
	}
	return nil
}

func checkManifest(b block) error {
	if err := checkYAMLDocuments(b); err != nil {
		return err
	}
	for _, doc := range splitYAML(b.body) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return err
		}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" || obj.GetName() == "" {
			return errors.New("a Kubernetes object needs apiVersion, kind and metadata.name")
		}
	}
	return nil
}

// checkParentValues writes the sample child's new image and chart version
// into the values of an app-of-apps parent, as the git write-back does.
func checkParentValues(b, written block) error {
	img, err := imageref.Parse("123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app")
	if err != nil {
		return err
	}
	images := []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "app", Image: img}, New: imageref.Version{Tag: "v0.0.2"}}}
	charts := []writeback.ChartUpdate{{ChartSpec: settings.ChartSpec{Alias: "web", Chart: "web"}, New: "1.1.0"}}
	def := manifest.ApplicationDefinition{Namespace: "argocd", Name: "web", DefaultNamespace: "argocd", Source: -1}
	out, mc, err := manifest.SetApplicationMarkers("values.yaml", []byte(b.body), def, images, charts)
	switch {
	case err != nil:
		return err
	case !mc.Images["app"] || !mc.Charts["web"]:
		return fmt.Errorf("the markers name image app %v and chart web %v of argocd/web; want both", mc.Images["app"], mc.Charts["web"])
	case string(out) != written.body:
		return fmt.Errorf("written:\n%s\nthe next block shows:\n%s", out, written.body)
	}
	return nil
}

// markedDigest is the digest the sample image web is pinned to.
const markedDigest = "sha256:4a1f0c9e8d7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f"

// checkMarked writes the sample image web, pinned as 1.5.2@markedDigest,
// into the values its markers name, as the git write-back does.
func checkMarked(b, written block) error {
	img, err := imageref.Parse("ghcr.io/example/web")
	if err != nil {
		return err
	}
	images := []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "web", Image: img, PinDigest: settings.PinAlways}, New: imageref.Version{Tag: "1.5.2", Digest: markedDigest}}}
	out, found, _, err := manifest.SetMarkedImages("values.yaml", []byte(b.body), images)
	switch {
	case err != nil:
		return err
	case !found["web"]:
		return errors.New("no marker names the image web")
	case string(out) != written.body:
		return fmt.Errorf("written:\n%s\nthe next block shows:\n%s", out, written.body)
	}
	return nil
}

// chartValues is the chart's values.yaml, relative to docs/.
const chartValues = "../charts/argocd-image-updater/values.yaml"

func checkHelmValues(b block) error {
	data, err := os.ReadFile(chartValues)
	if err != nil {
		return err
	}
	var defaults, given map[string]any
	if err := yaml.Unmarshal(data, &defaults); err != nil {
		return fmt.Errorf("%s: %v", chartValues, err)
	}
	if err := yaml.Unmarshal([]byte(b.body), &given); err != nil {
		return err
	}
	if len(given) == 0 {
		return errors.New("no values")
	}
	return knownValues("", given, defaults)
}

// knownValues reports the keys of given that defaults lacks. A map that is
// empty in defaults (annotations, scripts) is the user's to fill.
func knownValues(prefix string, given, defaults map[string]any) error {
	keys := make([]string, 0, len(given))
	for k := range given {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		d, ok := defaults[k]
		if !ok {
			errs = append(errs, fmt.Errorf("%s%s is not a value of the chart", prefix, k))
			continue
		}
		gm, isMap := given[k].(map[string]any)
		dm, _ := d.(map[string]any)
		if isMap && len(dm) > 0 {
			errs = append(errs, knownValues(prefix+k+".", gm, dm))
		}
	}
	return errors.Join(errs...)
}

func checkCommitMessage(b, exp block, hasExp bool) error {
	tmpl, err := git.ParseCommitMessageTemplate(b.body)
	if err != nil {
		return err
	}
	msg, err := tmpl.Render(git.SampleCommitMessageData())
	if err != nil {
		return err
	}
	if hasExp && strings.TrimRight(msg, "\n") != strings.TrimRight(exp.body, "\n") {
		return fmt.Errorf("the template renders\n%s\nbut the text rendered block shows\n%s", msg, exp.body)
	}
	return nil
}

func checkPullRequest(b, exp block, hasExp bool) error {
	tmpl, err := git.ParsePullRequestTemplate(b.body)
	if err != nil {
		return err
	}
	title, body, err := tmpl.Render(git.SamplePullRequestData())
	if err != nil {
		return err
	}
	if got := title + "\n\n" + body; hasExp && got != strings.TrimRight(exp.body, "\n") {
		return fmt.Errorf("the template renders\n%s\nbut the text rendered block shows\n%s", got, exp.body)
	}
	return nil
}

// shellChecker checks command lines against the real binary, built once.
type shellChecker struct {
	once   sync.Once
	dir    string
	binary string
	err    error
}

func (s *shellChecker) build() error {
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "docs-test-"); s.err != nil {
			return
		}
		s.binary = filepath.Join(s.dir, "argocd-image-updater")
		cmd := exec.Command("go", "build", "-o", s.binary, "./cmd/argocd-image-updater")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			s.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	return s.err
}

func (s *shellChecker) cleanup() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

func (s *shellChecker) check(b block) error {
	commands, err := shellCommands(b.body)
	if err != nil {
		return err
	}
	var errs []error
	for _, words := range commands {
		for i, w := range words {
			if w == "kubectl" {
				if err := checkKubectl(words[i+1:]); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", strings.Join(words, " "), err))
				}
				continue
			}
			if isUpdaterBinary(w) && commandStart(words, i) {
				if err := s.checkUpdater(words[i+1:]); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", strings.Join(words, " "), err))
				}
				break
			}
		}
	}
	return errors.Join(errs...)
}

// commandStart tells whether words[i] is where a command starts: after
// nothing but variable assignments, or after the "--" that ends another
// command's options (kubectl exec ... -- argocd-image-updater ...).
func commandStart(words []string, i int) bool {
	if i > 0 && words[i-1] == "--" {
		return true
	}
	for _, w := range words[:i] {
		if !strings.Contains(w, "=") || strings.HasPrefix(w, "-") {
			return false
		}
	}
	return true
}

// isUpdaterBinary tells the program from a Deployment name such as
// deploy/argocd-image-updater.
func isUpdaterBinary(w string) bool {
	if w == "argocd-image-updater" {
		return true
	}
	return strings.HasSuffix(w, "/argocd-image-updater") &&
		(strings.HasPrefix(w, "/") || strings.HasPrefix(w, "./") || strings.HasPrefix(w, "bin/"))
}

// checkUpdater runs the command line with --help: cobra parses every flag
// (an unknown flag or a bad value fails) and then prints the help instead
// of running. The help must name the subcommand and every flag given.
func (s *shellChecker) checkUpdater(args []string) error {
	if err := s.build(); err != nil {
		return err
	}
	cmd := exec.Command(s.binary, append(append([]string(nil), args...), "--help")...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v\n%s", err, out.String())
	}
	help := out.String()
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") && !strings.Contains(help, "argocd-image-updater "+args[0]+" ") {
		return fmt.Errorf("%q is not a command:\n%s", args[0], help)
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(name) + `(\s|$)`).MatchString(help) {
			return fmt.Errorf("flag %s is not listed by --help:\n%s", name, help)
		}
	}
	return nil
}

// checkKubectl checks that files given with -f or -k exist in the
// repository.
func checkKubectl(args []string) error {
	for i := 0; i+1 < len(args); i++ {
		if args[i] != "-f" && args[i] != "-k" && args[i] != "--patch-file" {
			continue
		}
		p := args[i+1]
		if strings.Contains(p, "://") || p == "-" {
			continue
		}
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			return fmt.Errorf("%s is not a file of the repository", p)
		}
	}
	return nil
}

// shellCommands splits a shell snippet into commands and words: lines joined
// at a trailing backslash, comments dropped, single and double quotes
// honoured, and ";", "&&", "||" and "|" ending a command. Expansions are not
// performed; examples do not use them in checked lines.
func shellCommands(body string) ([][]string, error) {
	body = strings.ReplaceAll(body, "\\\n", " ")
	var commands [][]string
	for n, line := range strings.Split(body, "\n") {
		var words []string
		var cur strings.Builder
		inWord := false
		flush := func() {
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		}
		end := func() {
			flush()
			if len(words) > 0 {
				commands = append(commands, words)
				words = nil
			}
		}
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case c == '\'' || c == '"':
				j := strings.IndexByte(line[i+1:], c)
				if j < 0 {
					return nil, fmt.Errorf("line %d: unterminated quote", n+1)
				}
				cur.WriteString(line[i+1 : i+1+j])
				inWord = true
				i += j + 1
			case c == '\\' && i+1 < len(line):
				cur.WriteByte(line[i+1])
				inWord = true
				i++
			case c == '#' && !inWord:
				i = len(line)
			case c == ' ' || c == '\t':
				flush()
			case c == ';' || c == '|' || c == '&':
				end()
				if i+1 < len(line) && (line[i+1] == '|' || line[i+1] == '&') {
					i++
				}
			default:
				cur.WriteByte(c)
				inWord = true
			}
		}
		end()
	}
	return commands, nil
}

// TestLinks checks that relative links between the documents lead to
// files that exist, and that the README links every document.
func TestLinks(t *testing.T) {
	linkRE := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, file := range markdownFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(data), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(file), target)); err != nil {
				t.Errorf("%s: link to %s: no such file", file, m[1])
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob("*.md")
	for _, d := range docs {
		if !strings.Contains(string(readme), "](docs/"+d+")") {
			t.Errorf("README.md does not link docs/%s", d)
		}
	}
}

// TestExtractor guards the extractor itself: indented fences, info strings
// and unclosed blocks.
func TestExtractor(t *testing.T) {
	text := "# t\n\n```yaml registries.conf\nregistries: []\n```\n\n1. step\n\n   ```sh\n   argocd-image-updater version\n   ```\n"
	blocks, err := extractBlocks("x.md", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].tags != "registries.conf" || blocks[1].lang != "sh" ||
		blocks[1].body != "argocd-image-updater version\n" || blocks[1].line != 9 {
		t.Fatalf("got %+v", blocks)
	}
	if _, err := extractBlocks("x.md", "```sh\nls\n"); err == nil {
		t.Fatal("an unclosed block was accepted")
	}
	cmds, err := shellCommands("A=1 argocd-image-updater run \\\n  --once # comment\nls | grep 'a b' && echo \"c\"\n")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"A=1", "argocd-image-updater", "run", "--once"}, {"ls"}, {"grep", "a b"}, {"echo", "c"}}
	if fmt.Sprint(cmds) != fmt.Sprint(want) {
		t.Fatalf("shellCommands = %q, want %q", cmds, want)
	}
}
