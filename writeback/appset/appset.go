// Package appset reads an ApplicationSet as its controller does, as far as
// writing a version back needs it: which element of its generators
// generated an Application (the one whose parameters render the
// Application's name), and which of that element's values, or of its
// template's, holds a version. It does no I/O: the ApplicationSet and the
// files its git generator reads are given.
package appset

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"text/template"
)

// Spec is what of an ApplicationSet is read.
type Spec struct {
	Namespace, Name string
	// GoTemplate is spec.goTemplate: parameters are rendered with Go's
	// text/template; otherwise as {{name}} placeholders.
	GoTemplate bool
	Generators []Generator
	// Template is spec.template, as a map.
	Template map[string]any
}

// Generator is one of spec.generators that this package reads: a list
// generator's elements, or a git generator's files.
type Generator struct {
	// Index is its index in spec.generators.
	Index int
	// Elements are a list generator's.
	Elements []map[string]any
	// Files are a git files generator's include patterns, RepoURL and
	// Revision its repository.
	Files             []string
	RepoURL, Revision string
	// Other names a generator of another kind (matrix, cluster, ...),
	// which no version is written into.
	Other string
}

// FromObject reads an ApplicationSet object (as unstructured holds it).
func FromObject(obj map[string]any) (Spec, error) {
	var raw struct {
		Metadata struct{ Namespace, Name string }
		Spec     struct {
			GoTemplate bool             `json:"goTemplate"`
			Generators []map[string]any `json:"generators"`
			Template   map[string]any   `json:"template"`
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return Spec{}, err
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Spec{}, fmt.Errorf("ApplicationSet: %w", err)
	}
	s := Spec{Namespace: raw.Metadata.Namespace, Name: raw.Metadata.Name, GoTemplate: raw.Spec.GoTemplate, Template: raw.Spec.Template}
	for i, g := range raw.Spec.Generators {
		gen := Generator{Index: i}
		switch {
		case g["list"] != nil:
			l, _ := g["list"].(map[string]any)
			for _, e := range asSlice(l["elements"]) {
				m, _ := e.(map[string]any)
				gen.Elements = append(gen.Elements, m)
			}
		case g["git"] != nil:
			gm, _ := g["git"].(map[string]any)
			gen.RepoURL, _ = gm["repoURL"].(string)
			gen.Revision, _ = gm["revision"].(string)
			for _, f := range asSlice(gm["files"]) {
				fm, _ := f.(map[string]any)
				if p, _ := fm["path"].(string); p != "" && fm["exclude"] != true {
					gen.Files = append(gen.Files, p)
				}
			}
			if len(gen.Files) == 0 {
				gen.Other = "git directories"
			}
		default:
			for k := range g {
				if k != "selector" && k != "values" {
					gen.Other = k
				}
			}
		}
		s.Generators = append(s.Generators, gen)
	}
	return s, nil
}

func (s Spec) String() string { return s.Namespace + "/" + s.Name }

func asSlice(v any) []any {
	l, _ := v.([]any)
	return l
}

// Params are one element's parameters, nested as a Go template sees them.
type Params map[string]any

// ListParams are a list element's parameters, as the list generator makes
// them: the element itself.
func ListParams(element map[string]any) Params { return Params(element) }

// FileParams are the parameters the git files generator makes of the file
// at file whose content is doc: its keys, and the path's parts.
func (s Spec) FileParams(file string, doc map[string]any) Params {
	p := Params{}
	for k, v := range doc {
		p[k] = v
	}
	dir := path.Dir(file)
	parts := map[string]any{
		"path":               dir,
		"basename":           path.Base(dir),
		"filename":           path.Base(file),
		"basenameNormalized": normalize(path.Base(dir)),
		"filenameNormalized": normalize(path.Base(file)),
	}
	var segments []any
	for _, seg := range strings.Split(dir, "/") {
		segments = append(segments, seg)
	}
	parts["segments"] = segments
	p["path"] = parts
	return p
}

var notDNS = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// normalize is the controller's: what is not a letter, digit or '-'
// becomes '-', lower case.
func normalize(s string) string { return strings.ToLower(notDNS.ReplaceAllString(s, "-")) }

// flat is p as placeholders name its values: keys joined with '.', the
// path's parts as path, path.basename, path[0], ...
func (p Params) flat() map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				walk(join(prefix, k), e)
			}
		case Params:
			walk(prefix, map[string]any(t))
		case string:
			out[prefix] = t
		case nil:
			out[prefix] = ""
		default:
			b, _ := json.Marshal(t)
			out[prefix] = string(b)
		}
	}
	for k, v := range p {
		if k == "path" {
			if parts, ok := v.(map[string]any); ok {
				for pk, pv := range parts {
					if pk == "path" {
						out["path"], _ = pv.(string)
					} else if pk == "segments" {
						for i, seg := range asSlice(pv) {
							out[fmt.Sprintf("path[%d]", i)], _ = seg.(string)
						}
					} else {
						out["path."+pk], _ = pv.(string)
					}
				}
				continue
			}
		}
		walk(k, v)
	}
	return out
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

var placeholder = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// Render renders text as the ApplicationSet controller renders its
// template's strings with p.
func (s Spec) Render(text string, p Params) (string, error) {
	if !s.GoTemplate {
		flat := p.flat()
		return placeholder.ReplaceAllStringFunc(text, func(m string) string {
			if v, ok := flat[placeholder.FindStringSubmatch(m)[1]]; ok {
				return v
			}
			return m
		}), nil
	}
	t, err := template.New("").Option("missingkey=zero").Funcs(funcs).Parse(text)
	if err != nil {
		return "", fmt.Errorf("ApplicationSet %s: the template %q: %w", s, text, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, map[string]any(p)); err != nil {
		return "", fmt.Errorf("ApplicationSet %s: the template %q: %w", s, text, err)
	}
	return b.String(), nil
}

// funcs are the template functions names are most often rendered with;
// a template using another is an error naming it.
var funcs = template.FuncMap{
	"lower":     strings.ToLower,
	"upper":     strings.ToUpper,
	"trim":      strings.TrimSpace,
	"normalize": normalize,
	"replace":   func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
	"trunc": func(n int, s string) string {
		if n >= 0 && len(s) > n {
			return s[:n]
		}
		return s
	},
}

// name is the Application name the template renders with p.
func (s Spec) name(p Params) (string, error) {
	meta, _ := s.Template["metadata"].(map[string]any)
	n, _ := meta["name"].(string)
	if n == "" {
		return "", fmt.Errorf("ApplicationSet %s: its template has no metadata.name", s)
	}
	return s.Render(n, p)
}

// Generates tells whether p renders the Application name app.
func (s Spec) Generates(p Params, app string) (bool, error) {
	n, err := s.name(p)
	return err == nil && n == app, err
}

// Element is the list element that generates the Application app: its
// generator's index and its own; ok is false when no list element does.
// Two elements rendering one name are an error: the ApplicationSet
// controller refuses them too.
func (s Spec) Element(app string) (gen, elem int, ok bool, _ error) {
	for _, g := range s.Generators {
		for i, e := range g.Elements {
			yes, err := s.Generates(ListParams(e), app)
			if err != nil {
				return 0, 0, false, err
			}
			if yes {
				if ok {
					return 0, 0, false, fmt.Errorf("ApplicationSet %s: two list elements (generators[%d].list.elements[%d] and generators[%d].list.elements[%d]) generate Application %s", s, gen, elem, g.Index, i, app)
				}
				gen, elem, ok = g.Index, i, true
			}
		}
	}
	return gen, elem, ok, nil
}

// Step is one step of a path into a document: a mapping key, or (Key
// empty) a sequence index.
type Step struct {
	Key   string
	Index int
}

// Path is a path into a document.
type Path []Step

func (p Path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.Key == "":
			fmt.Fprintf(&b, "[%d]", s.Index)
		case i > 0:
			b.WriteString("." + s.Key)
		default:
			b.WriteString(s.Key)
		}
	}
	return b.String()
}

// Keys is the path of mapping keys p.
func Keys(keys ...string) Path {
	p := make(Path, len(keys))
	for i, k := range keys {
		p[i] = Step{Key: k}
	}
	return p
}

// Value is a string value found in a document, and what it becomes.
type Value struct {
	Path     Path
	From, To string
}

// Change is one version: the value From is, or ends with after ':', is
// written To.
type Change struct {
	From, To string
}

func (c Change) rewrite(v string) (string, bool) {
	switch {
	case c.From == "":
		return "", false
	case v == c.From:
		return c.To, true
	case strings.HasSuffix(v, ":"+c.From) && !strings.ContainsAny(v, " {}"):
		// The image with its tag: registry/name:tag.
		return strings.TrimSuffix(v, c.From) + c.To, true
	}
	return "", false
}

// InParams is where in p the version c is held, as a path of keys, among
// the values that the template uses: exactly one must be.
func (s Spec) InParams(p Params, c Change) (Value, bool, error) {
	var found []Value
	var walk func(at Path, v any)
	walk = func(at Path, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				if len(at) == 0 && k == "path" && s.isPathParts(e) {
					continue
				}
				walk(append(slices.Clip(at), Step{Key: k}), e)
			}
		case Params:
			walk(at, map[string]any(t))
		case string:
			if to, ok := c.rewrite(t); ok && s.uses(at) {
				found = append(found, Value{Path: at, From: t, To: to})
			}
		}
	}
	walk(nil, p)
	return s.only(found, c, "and the template uses each")
}

// only is the one value found; several are an error naming them.
func (s Spec) only(found []Value, c Change, where string) (Value, bool, error) {
	switch len(found) {
	case 0:
		return Value{}, false, nil
	case 1:
		return found[0], true, nil
	}
	var at []string
	for _, f := range found {
		at = append(at, f.Path.String())
	}
	slices.Sort(at)
	return Value{}, false, fmt.Errorf("ApplicationSet %s: %s all hold %q %s: which one is the version is not known", s, strings.Join(at, ", "), c.From, where)
}

func (s Spec) isPathParts(v any) bool {
	m, ok := v.(map[string]any)
	return ok && m["segments"] != nil && m["filename"] != nil
}

// uses tells whether the template refers to the parameter at p.
func (s Spec) uses(p Path) bool {
	var keys []string
	for _, st := range p {
		if st.Key == "" {
			return false
		}
		keys = append(keys, st.Key)
	}
	b, err := json.Marshal(s.Template)
	if err != nil {
		return false
	}
	text := string(b)
	dotted := strings.Join(keys, ".")
	for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
		expr := m[1]
		if !s.GoTemplate {
			if expr == dotted {
				return true
			}
			continue
		}
		if regexp.MustCompile(`(^|[\s(|])\.` + regexp.QuoteMeta(dotted) + `($|[\s)|])`).MatchString(expr) {
			return true
		}
	}
	return false
}

// InTemplate is where in the template a literal value holds the version c
// (the same for every element): exactly one string, with no placeholder.
func (s Spec) InTemplate(c Change) (Value, bool, error) {
	var found []Value
	var walk func(at Path, v any)
	walk = func(at Path, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				walk(append(slices.Clip(at), Step{Key: k}), e)
			}
		case []any:
			for i, e := range t {
				walk(append(slices.Clip(at), Step{Index: i}), e)
			}
		case string:
			if to, ok := c.rewrite(t); ok && !placeholder.MatchString(t) {
				found = append(found, Value{Path: at, From: t, To: to})
			}
		}
	}
	walk(Keys("spec", "template"), s.Template)
	return s.only(found, c, "in its template")
}

// Matches tells whether file matches one of a files generator's patterns,
// as path.Match reads them ('*' within a folder).
func (g Generator) Matches(file string) bool {
	for _, p := range g.Files {
		if ok, _ := path.Match(p, file); ok {
			return true
		}
	}
	return false
}
