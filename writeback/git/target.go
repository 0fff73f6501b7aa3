package git

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path"
	"strings"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/internal/repoyaml"
	"github.com/image-updater/argocd-image-updater/settings"
	"github.com/image-updater/argocd-image-updater/writeback"
	"github.com/image-updater/argocd-image-updater/writeback/manifest"
)

// sourceOverrideFileName is the parameter override file Argo CD reads for
// an Application: .argocd-source-<app>.yaml, or
// .argocd-source-<namespace>_<app>.yaml for an Application outside the
// controller's namespace (Argo CD's "apps in any namespace" naming).
func sourceOverrideFileName(u update) string {
	if u.ControllerNamespace != "" && u.Namespace != u.ControllerNamespace {
		return ".argocd-source-" + u.Namespace + "_" + u.Name + ".yaml"
	}
	return ".argocd-source-" + u.Name + ".yaml"
}

// targetEdit is the change one Application makes: one file's new content
// (path, content), or several files' (files, for marked manifests).
type targetEdit struct {
	path    string
	content []byte
	files   map[string][]byte
	changed []writeback.ImageUpdate
	// charts are the chart versions it writes (app-of-apps only).
	charts []writeback.ChartUpdate
}

// contents are the files the edit writes.
func (e targetEdit) contents() map[string][]byte {
	if e.files != nil {
		return e.files
	}
	return map[string][]byte{e.path: e.content}
}

// planTarget computes the edit of one Application's write-back target.
// No edit (changed empty) means the target already holds every version.
// Every path it reads or writes is confined to the Application's grant:
// its repository, or for app-of-apps what its parent deploys.
func planTarget(t *repoTree, u update) (targetEdit, error) {
	g := repositoryGrant
	source, err := g.confine(".", u.SourcePath)
	if err != nil {
		return targetEdit{}, fmt.Errorf("source path: %w", err)
	}
	// A link out of the grant met while reading is told with the
	// annotation that led there.
	field := fmt.Sprintf("write-back-target %q", u.Target)
	if u.Target.Kind == settings.TargetSourceOverrides {
		field = fmt.Sprintf("source path %q", u.SourcePath)
	}
	confined := func(edit targetEdit, err error) (targetEdit, error) {
		if errors.Is(err, errOutsideGrant) {
			err = fmt.Errorf("%s: %w", field, err)
		}
		return edit, err
	}
	if u.Target.Kind == settings.TargetAppOfApps || u.Target.Kind == settings.TargetApplicationSet && u.Parent != nil {
		// The source is the parent's: what it deploys, links resolved.
		if g, err = parentGrant(t, u, source); err != nil {
			return targetEdit{}, fmt.Errorf("%s: %w", field, err)
		}
		source = g.root
	}
	// named is the path the annotation names, else def.
	named := func(def string) (string, error) {
		if u.Target.Path == "" {
			return def, nil
		}
		p, err := g.confine(source, u.Target.Path)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return p, nil
	}
	switch u.Target.Kind {
	case settings.TargetSourceOverrides:
		if u.SourceType == application.SourceDirectory {
			// Argo CD has no overrides for plain manifests: the values
			// marked with the image are written in the manifests.
			return confined(planMarkers(t, g, u, source))
		}
		return confined(planSourceOverrides(t, g, u, path.Join(source, sourceOverrideFileName(u))))
	case settings.TargetOverrideFile:
		// From the repository root whether or not it starts with '/', as
		// Argo CD Image Updater has always read it.
		file, err := g.confine(".", u.Target.Path)
		if err != nil {
			return targetEdit{}, fmt.Errorf("%s: %w", field, err)
		}
		return confined(planSourceOverrides(t, g, u, file))
	case settings.TargetKustomization:
		dir, err := named(source)
		if err != nil {
			return targetEdit{}, err
		}
		file, err := findKustomization(t, g, dir)
		if err != nil {
			return targetEdit{}, fmt.Errorf("%s: %w", field, err)
		}
		return planFileEdit(t, g, file, false, func(name string, src []byte) ([]byte, []writeback.ImageUpdate, error) {
			return manifest.SetKustomizationImages(name, src, u.Images)
		})
	case settings.TargetHelmValues:
		file, err := named(path.Join(source, "values.yaml"))
		if err != nil {
			return targetEdit{}, err
		}
		// Created when missing, with its folders, as Argo CD Image
		// Updater does.
		return confined(planFileEdit(t, g, file, true, func(name string, src []byte) ([]byte, []writeback.ImageUpdate, error) {
			return manifest.SetHelmValues(name, src, u.Images)
		}))
	case settings.TargetAppOfApps:
		dir, err := named(source)
		if err != nil {
			return targetEdit{}, err
		}
		return confined(planDefinition(t, g, u, dir))
	case settings.TargetApplicationSet:
		return confined(planAppSet(t, g, u, source))
	default:
		return targetEdit{}, fmt.Errorf("unknown write-back-target %q: use kustomization[:<dir>], helmvalues[:<file>], app-of-apps[:<dir>], applicationset or the path of an override file", u.Target)
	}
}

// planMarkers writes the images into the values marked with them in the
// YAML files under dir (see manifest.SetMarkedImages), its sub-folders
// included. An image that no file marks is an error: there is nowhere
// else to write it.
func planMarkers(t *repoTree, g grant, u update, dir string) (targetEdit, error) {
	edit := targetEdit{files: map[string][]byte{}}
	found := map[string]bool{}
	changed := map[string]bool{}
	err := walkYAML(t, g, dir, "marked images", func(p string, content []byte) (bool, error) {
		if !manifest.HasMarkers(content) {
			return true, nil
		}
		out, marked, c, err := manifest.SetMarkedImages(p, content, u.Images)
		if err != nil {
			return false, err
		}
		for a := range marked {
			found[a] = true
		}
		if len(c) > 0 {
			edit.files[p] = out
			for _, img := range c {
				changed[img.Alias] = true
			}
		}
		return true, nil
	})
	if err != nil {
		return targetEdit{}, err
	}
	var missing []string
	for _, img := range u.Images {
		switch {
		case !found[img.Alias]:
			missing = append(missing, img.Key())
		case changed[img.Alias]:
			edit.changed = append(edit.changed, img)
		}
	}
	d, _ := t.stat(g, dir)
	if len(missing) > 0 {
		return targetEdit{}, fmt.Errorf("no YAML file under %s marks the image %s: add # {\"%s\": \"<alias>\"} after its value (a plain-manifest source has no override file)", d.path, strings.Join(missing, ", "), manifest.MarkerKey)
	}
	edit.path = d.path
	return edit, nil
}

// planDefinition writes the images and the chart version into the
// parent's manifests, the YAML files under dir: into the document that
// defines the Application, or, where none does (a parent that is a Helm
// chart, whose templates range over its values), into the values marked
// with the Application (see manifest.SetApplicationMarkers). In a file
// that holds the definition, its markers are not read. A Helm template,
// which is seldom YAML, is passed over by the search for the definition.
func planDefinition(t *repoTree, g grant, u update, dir string) (targetEdit, error) {
	def := manifest.ApplicationDefinition{Namespace: u.Namespace, Name: u.Name, Source: u.SourceIndex, SourceType: u.SourceType}
	parent := "its parent"
	if u.Parent != nil {
		// Where Argo CD creates what the parent's manifests leave without
		// a namespace; without a destination namespace that is not known
		// (not the parent's own namespace), and such a document is no
		// proof of being the child's.
		def.DefaultNamespace = u.Parent.DestinationNamespace
		parent = "its parent " + u.Parent.key()
	}
	change := manifest.SourceChange{Images: u.Images}
	if len(u.Charts) > 0 {
		// A source deploys one chart.
		change.Revision = u.Charts[0].New
	}
	edit := targetEdit{files: map[string][]byte{}}
	defined := false
	var unproven []string
	markedImages, markedCharts := map[string]bool{}, map[string]bool{}
	changedImages, changedCharts := map[string]bool{}, map[string]bool{}
	err := walkYAML(t, g, dir, "the definition of an Application", func(p string, content []byte) (bool, error) {
		if !bytes.Contains(content, []byte(u.Name)) {
			return true, nil
		}
		out, m, changed, err := manifest.SetApplicationSource(p, content, def, change)
		for _, line := range m.Unproven {
			unproven = append(unproven, fmt.Sprintf("%s:%d", p, line))
		}
		switch {
		case err != nil && !(errors.Is(err, repoyaml.ErrInvalid) && bytes.Contains(content, []byte("{{"))):
			return false, err
		case m.Found():
			defined = true
			if len(changed.Images) > 0 || changed.Revision {
				edit.files[p] = out
			}
			for _, img := range changed.Images {
				changedImages[imageID(img)] = true
			}
			if changed.Revision {
				for _, c := range u.Charts {
					changedCharts[chartID(c)] = true
				}
			}
			return true, nil
		case !manifest.HasMarkers(content):
			return true, nil
		}
		out, mc, err := manifest.SetApplicationMarkers(p, content, def, u.Images, u.Charts)
		if err != nil {
			return false, err
		}
		maps.Copy(markedImages, mc.Images)
		maps.Copy(markedCharts, mc.Charts)
		if len(mc.ChangedImages)+len(mc.ChangedCharts) > 0 {
			edit.files[p] = out
		}
		for _, img := range mc.ChangedImages {
			changedImages[imageID(img)] = true
		}
		for _, c := range mc.ChangedCharts {
			changedCharts[chartID(c)] = true
		}
		return true, nil
	})
	if err != nil {
		return targetEdit{}, err
	}
	var missing []string
	for _, img := range u.Images {
		if !defined && (img.Alias == "" || !markedImages[img.Alias]) {
			missing = append(missing, unmarked("image", img.Alias, img.Key()))
		}
		if changedImages[imageID(img)] {
			edit.changed = append(edit.changed, img)
		}
	}
	for _, c := range u.Charts {
		if !defined && (c.Alias == "" || !markedCharts[c.Alias]) {
			missing = append(missing, unmarked("chart", c.Alias, c.Key()))
		}
		if changedCharts[chartID(c)] {
			edit.charts = append(edit.charts, c)
		}
	}
	d, _ := t.stat(g, dir)
	if len(missing) > 0 {
		err := fmt.Errorf("no YAML file under %s of %s's repository defines Application %s (kind Application, its name and namespace) or marks its %s: add # {\"%s\": \"%s/<alias>\"} after the value in the parent's files (a Helm parent's values file), the image or chart named by its alias", d.path, parent, u.key(), strings.Join(missing, ", "), manifest.MarkerKey, markerApplication(def))
		if len(unproven) > 0 {
			err = fmt.Errorf("the Application %s at %s names no namespace, and %s has no spec.destination.namespace to create it in, so it is not taken as the definition of %s (write metadata.namespace: %s in it); %w", u.Name, strings.Join(unproven, ", "), parent, u.key(), u.Namespace, err)
		}
		return targetEdit{}, err
	}
	edit.path = d.path
	if len(edit.files) == 1 {
		for p, c := range edit.files {
			edit.path, edit.content, edit.files = p, c, nil
		}
	}
	return edit, nil
}

// imageID and chartID tell apart the images and charts of an update,
// whose aliases may be empty.
func imageID(img writeback.ImageUpdate) string { return img.Alias + "\x00" + img.Image.OriginalName() }
func chartID(c writeback.ChartUpdate) string   { return c.Alias + "\x00" + c.Chart }

// unmarked names an image or chart no marker names, and why when it has
// no alias to be named by.
func unmarked(what, alias, key string) string {
	if alias == "" {
		return what + " " + key + " (which has no alias: give it one in its list, <alias>=" + key + ")"
	}
	return what + " " + alias
}

// markerApplication is how a marker names the Application: without its
// namespace when that is where the parent creates it.
func markerApplication(def manifest.ApplicationDefinition) string {
	if def.Namespace == def.DefaultNamespace {
		return def.Name
	}
	return def.Namespace + "/" + def.Name
}

// planSourceOverrides edits, or creates (with its folders, as Argo CD
// Image Updater does), a file in the .argocd-source format.
func planSourceOverrides(t *repoTree, g grant, u update, file string) (targetEdit, error) {
	content, f, err := t.read(g, file)
	switch {
	case err != nil:
		return targetEdit{}, err
	case f.isDir:
		return targetEdit{}, fmt.Errorf("%s is a folder, not a file", f.path)
	}
	out, changed, err := manifest.SetSourceOverrides(f.path, content, u.SourceType, u.Images)
	if err != nil {
		return targetEdit{}, err
	}
	return targetEdit{path: f.path, content: out, changed: changed}, nil
}

// planFileEdit edits a file, which must exist unless create is set.
func planFileEdit(t *repoTree, g grant, file string, create bool, edit func(name string, src []byte) ([]byte, []writeback.ImageUpdate, error)) (targetEdit, error) {
	content, f, err := t.read(g, file)
	switch {
	case err != nil:
		return targetEdit{}, err
	case !f.exists && !create:
		return targetEdit{}, fmt.Errorf("%s does not exist", f.path)
	case f.isDir:
		return targetEdit{}, fmt.Errorf("%s is a folder, not a file", f.path)
	}
	out, changed, err := edit(f.path, content)
	if err != nil {
		return targetEdit{}, err
	}
	return targetEdit{path: f.path, content: out, changed: changed}, nil
}

// findKustomization finds the one kustomization file of a folder.
func findKustomization(t *repoTree, g grant, dir string) (string, error) {
	d, err := t.stat(g, dir)
	switch {
	case err != nil:
		return "", err
	case !d.exists:
		return "", fmt.Errorf("folder %s does not exist", d.path)
	case !d.isDir:
		return "", fmt.Errorf("%s is a file, not a folder", d.path)
	}
	var found []string
	for _, name := range manifest.KustomizationFileNames() {
		f, err := t.stat(g, path.Join(d.path, name))
		if err != nil {
			return "", err
		}
		if f.exists && !f.isDir {
			found = append(found, path.Join(d.path, name))
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no %s in %s", strings.Join(manifest.KustomizationFileNames(), ", "), d.path)
	case 1:
		return found[0], nil
	default:
		return "", fmt.Errorf("%s holds more than one kustomization file (%s), which kustomize refuses too", d.path, strings.Join(found, ", "))
	}
}
