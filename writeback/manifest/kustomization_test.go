package manifest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/repoyaml"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
)

const (
	gitAppImage = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app"
	gitWebImage = "ghcr.io/example/web"
	gitDigest   = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// goldenUpdate regenerates expected files when set: UPDATE_GOLDEN=1 go test.
func goldenUpdate() bool { return os.Getenv("UPDATE_GOLDEN") != "" }

// TestKustomizationGolden edits the kustomizations in
// testdata/kustomization/original and compares the result byte for byte
// with testdata/kustomization/expected: only the images entries change.
func TestKustomizationGolden(t *testing.T) {
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2"}, Old: imageref.ParseVersion("v0.0.1")}
	web := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(gitWebImage)}, New: imageref.Version{Tag: "1.5.0"}, Old: imageref.ParseVersion("1.4.0")}
	tests := map[string]struct {
		images  []writeback.ImageUpdate
		changed []string
	}{
		"commented.yaml":     {[]writeback.ImageUpdate{app, web}, []string{"app", "web"}},
		"no-images.yaml":     {[]writeback.ImageUpdate{app}, []string{"app"}},
		"no-newline.yaml":    {[]writeback.ImageUpdate{app, web}, []string{"app", "web"}},
		"flow.yaml":          {[]writeback.ImageUpdate{app}, []string{"app"}},
		"null-images.yaml":   {[]writeback.ImageUpdate{app}, []string{"app"}},
		"crlf.yaml":          {[]writeback.ImageUpdate{app, web}, []string{"app", "web"}},
		"rename-digest.yaml": {[]writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(gitWebImage), KustomizeImageName: mustRef("web")}, New: imageref.Version{Tag: "1.5.0"}}, {ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2", Digest: gitDigest}}}, []string{"web", "app"}},
	}
	files, err := filepath.Glob("testdata/kustomization/original/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests) {
		t.Errorf("%d files in testdata/kustomization/original, %d cases", len(files), len(tests))
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			checkGolden(t, "testdata/kustomization", name, tt.images, tt.changed, SetKustomizationImages)
		})
	}
}

// checkGolden edits testdata/<dir>/original/<name> with edit and compares
// the result with expected/<name> (rewritten when UPDATE_GOLDEN is set). A
// second pass over the result must find nothing to do and keep the bytes.
func checkGolden(t *testing.T, dir, name string, images []writeback.ImageUpdate, wantChanged []string,
	edit func(name string, src []byte, images []writeback.ImageUpdate) ([]byte, []writeback.ImageUpdate, error)) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, "original", name))
	if err != nil {
		t.Fatal(err)
	}
	got, changed, err := edit(name, src, images)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantChanged, aliases(changed)); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	expectedPath := filepath.Join(dir, "expected", name)
	if goldenUpdate() {
		if err := os.WriteFile(expectedPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(expectedPath)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("edited file (-want +got):\n%s", diff)
	}
	again, changed, err := edit(name, got, images)
	if err != nil || len(changed) != 0 || string(again) != string(got) {
		t.Errorf("second pass: changed %v, err %v, same bytes %v", aliases(changed), err, string(again) == string(got))
	}
}

// TestKustomizationOnlyImagesBlockChanges checks the commented fixture
// line by line: every line outside the images block is kept as it was.
func TestKustomizationOnlyImagesBlockChanges(t *testing.T) {
	src, err := os.ReadFile("testdata/kustomization/original/commented.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := SetKustomizationImages("commented.yaml", src, []writeback.ImageUpdate{
		{ImageSpec: settings.ImageSpec{Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2"}}, {ImageSpec: settings.ImageSpec{Image: mustRef(gitWebImage)}, New: imageref.Version{Tag: "1.5.0"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	before, after := strings.SplitAfter(string(src), "\n"), strings.SplitAfter(string(got), "\n")
	blockStart := func(lines []string) int {
		for i, l := range lines {
			if strings.HasPrefix(l, "images:") {
				return i
			}
		}
		t.Fatal("no images block")
		return 0
	}
	blockEnd := func(lines []string) int {
		for i := blockStart(lines) + 1; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], "patches:") {
				return i
			}
		}
		t.Fatal("no patches key")
		return 0
	}
	if diff := cmp.Diff(before[:blockStart(before)], after[:blockStart(after)]); diff != "" {
		t.Errorf("lines before the images block changed:\n%s", diff)
	}
	if diff := cmp.Diff(before[blockEnd(before):], after[blockEnd(after):]); diff != "" {
		t.Errorf("lines after the images block changed:\n%s", diff)
	}
}

func TestKustomizationErrors(t *testing.T) {
	app := []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v1"}}}
	tests := []struct {
		name, src, want string
	}{
		{"invalid YAML", "resources:\n- a\n  images: [\n", "kustomization.yaml: invalid YAML: yaml: line"},
		{"images not a list", "images:\n  name: x\n", "kustomization.yaml:2: images is a map, not a list"},
		{"top level not a map", "- a\n- b\n", "kustomization.yaml:1: not a kustomization"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := SetKustomizationImages("kustomization.yaml", []byte(tt.src), app)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestKustomizationEmptyFile(t *testing.T) {
	got, changed, err := SetKustomizationImages("k.yaml", []byte("# only a comment\n"), []writeback.ImageUpdate{{ImageSpec: settings.ImageSpec{Image: mustRef(gitAppImage), KustomizeImageName: mustRef("app")}, New: imageref.Version{Tag: "1.0"}}})
	if err != nil || len(changed) != 1 {
		t.Fatalf("changed %d, err %v", len(changed), err)
	}
	want := "# only a comment\nimages:\n- name: app\n  newName: " + gitAppImage + "\n  newTag: \"1.0\"\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestKustomizationDocumentStart: a leading "---" and a %YAML directive
// stay, whichever edit the images list needs.
func TestKustomizationDocumentStart(t *testing.T) {
	app := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "app", Image: mustRef(gitAppImage)}, New: imageref.Version{Tag: "v0.0.2"}}
	tests := []struct{ name, src, want string }{
		{"entry updated", "---\nimages:\n- name: " + gitAppImage + "\n  newTag: v0.0.1\n", "---\nimages:\n- name: " + gitAppImage + "\n  newTag: v0.0.2\n"},
		{"list added", "%YAML 1.2\n---\nresources: []\n", "%YAML 1.2\n---\nresources: []\nimages:\n- name: " + gitAppImage + "\n  newTag: v0.0.2\n"},
		{"flow list rewritten", "--- # overlay\nimages: []\n", "--- # overlay\nimages:\n- name: " + gitAppImage + "\n  newTag: v0.0.2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := SetKustomizationImages("kustomization.yaml", []byte(tt.src), []writeback.ImageUpdate{app})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// bigKustomization is a 95 KB kustomization naming n images at v1 after
// its resources.
func bigKustomization(n int) ([]byte, []writeback.ImageUpdate) {
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for i := 0; b.Len() < 90_000; i++ {
		fmt.Fprintf(&b, "- manifests/deployment-%d.yaml\n", i)
	}
	b.WriteString("images:\n")
	var images []writeback.ImageUpdate
	for i := range n {
		fmt.Fprintf(&b, "- name: ghcr.io/org/app%d\n  newTag: v1\n", i)
		images = append(images, writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: fmt.Sprintf("a%d", i), Image: mustRef(fmt.Sprintf("ghcr.io/org/app%d", i))}, New: imageref.Version{Tag: "v2"}})
	}
	return []byte(b.String()), images
}

// TestKustomizationImagesOneParse: the entries of all images are edited
// from one parse of the file, so 200 images cost about what one does
// (measured: 3.7 MiB allocated for one image, 5.5 MiB and 0.1 s for 200).
// Edited one at a time, as before, each parsing and checking the file
// again and each image's name compared by parsing every entry's, 200
// images of this 95 KB kustomization allocated 1.7 GiB and took 19 s.
func TestKustomizationImagesOneParse(t *testing.T) {
	src, images := bigKustomization(200)
	cost := func(n int) uint64 {
		var out []byte
		var changed []writeback.ImageUpdate
		var err error
		grew := allocated(func() { out, changed, err = SetKustomizationImages("kustomization.yaml", src, images[:n]) })
		if err != nil || len(changed) != n || bytes.Count(out, []byte("newTag: v2\n")) != n {
			t.Fatalf("%d images: %d changed, %v", n, len(changed), err)
		}
		return grew
	}
	one, all := cost(1), cost(200)
	t.Logf("allocated: %d KiB for one image, %d KiB for 200", one>>10, all>>10)
	if all > 3*one {
		t.Errorf("200 images allocated %d KiB, more than three times the %d KiB of one", all>>10, one>>10)
	}
}

// TestKustomizationAtOnceMatchesEach: the edits made from one parse give
// the bytes the edits made one image at a time give, for the layouts of
// the golden files and for entries added, changed and cleared together.
func TestKustomizationAtOnceMatchesEach(t *testing.T) {
	img := func(alias, name, tag, digest string) writeback.ImageUpdate {
		return writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: alias, Image: mustRef(name)}, New: imageref.Version{Tag: tag, Digest: digest}}
	}
	renamed := writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: "web", Image: mustRef(gitWebImage), KustomizeImageName: mustRef("web")}, New: imageref.Version{Tag: "1.5.0"}}
	sets := [][]writeback.ImageUpdate{
		{img("app", gitAppImage, "v0.0.2", "")},
		{img("app", gitAppImage, "v0.0.2", gitDigest), img("nginx", "nginx", "1.27.0", "")},
		{img("new1", "ghcr.io/x/new1", "1", ""), img("app", gitAppImage, "v0.0.3", ""), img("new2", "ghcr.io/x/new2", "2", gitDigest)},
		{renamed, img("app", gitAppImage, "v0.0.1", "")},
		{img("nginx", "nginx", "1.25.3", ""), img("app", gitAppImage, "v0.0.1", "")},
	}
	files, err := filepath.Glob("testdata/kustomization/original/*")
	if err != nil {
		t.Fatal(err)
	}
	big, bigImages := bigKustomization(20)
	inputs := map[string][]byte{"big": big}
	for _, f := range files {
		if inputs[filepath.Base(f)], err = os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	sets = append(sets, bigImages, append(bigImages[:5:5], img("added", "ghcr.io/x/added", "3", "")))
	for name, src := range inputs {
		for i, images := range sets {
			got, changed, err := SetKustomizationImages(name, src, images)
			if err != nil {
				t.Errorf("%s, set %d: %v", name, i, err)
				continue
			}
			want, err := setKustomizationImagesEach(name, src, images)
			if err != nil {
				t.Errorf("%s, set %d, one at a time: %v", name, i, err)
				continue
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s, set %d (-one at a time +at once):\n%s", name, i, diff)
			}
			if len(changed) == 0 && string(got) != string(src) {
				t.Errorf("%s, set %d: nothing changed, but the bytes did", name, i)
			}
		}
	}
}

// TestManyImagesFlowKustomization: a kustomization whose layout the edits
// from one parse do not handle (a flow-style list) and that names many
// images is edited with one rewrite of its images block, not one parse
// and check per image.
func TestManyImagesFlowKustomization(t *testing.T) {
	var b strings.Builder
	var entries []string
	var images []writeback.ImageUpdate
	b.WriteString("# the team's overlay\nresources:\n- ../../base\n")
	for i := range 200 {
		name := fmt.Sprintf("example.com/team/app%d", i)
		fmt.Fprintf(&b, "# %s\n", strings.Repeat("n", 400))
		entries = append(entries, fmt.Sprintf("{name: %s, newTag: v1}", name))
		images = append(images, writeback.ImageUpdate{ImageSpec: settings.ImageSpec{Alias: fmt.Sprintf("app%d", i), Image: mustRef(name)}, New: imageref.Version{Tag: "v2"}})
	}
	b.WriteString("images: [" + strings.Join(entries, ", ") + "]\n")
	src := []byte(b.String())
	var out []byte
	var changed []writeback.ImageUpdate
	var err error
	grew := allocated(func() { out, changed, err = SetKustomizationImages("kustomization.yaml", src, images) })
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != len(images) {
		t.Errorf("%d images changed, want %d", len(changed), len(images))
	}
	var got struct {
		Resources []string
		Images    []map[string]string
	}
	if err := repoyaml.Unmarshal("kustomization.yaml", out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Images) != len(images) || len(got.Resources) != 1 {
		t.Fatalf("%d images, %d resources", len(got.Images), len(got.Resources))
	}
	for i, e := range got.Images {
		if e["name"] != fmt.Sprintf("example.com/team/app%d", i) || e["newTag"] != "v2" {
			t.Fatalf("entry %d: %v", i, e)
		}
	}
	if !strings.HasPrefix(string(out), "# the team's overlay\n") {
		t.Error("the lines before the images block changed")
	}
	t.Logf("%d KB file, %d images: %d MiB allocated", len(src)>>10, len(images), grew>>20)
	if grew > 256<<20 {
		t.Errorf("the edit allocated %d MiB", grew>>20)
	}
}
