package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// GenericMapping says where a payload of any other sender (a CI system, a
// registry without a format of its own, a bridge) names the repository
// pushed and its tag. Each field is a dot path into the JSON payload:
// object keys, and array indexes as numbers ("events.0.target.repository").
type GenericMapping struct {
	// Repository is the path of a string holding [host/]path, and
	// optionally :tag, of the repository pushed; required. Without a
	// host, the host of the registry_url query parameter applies, else
	// Docker Hub, as in an image list.
	Repository string
	// Tag is the path of a string holding the tag pushed; "" when the
	// repository's value carries it, or names none.
	Tag string
}

// Bounds of a mapping's paths, which the operator writes: a real one has a
// few segments.
const (
	maxFieldPath     = 256
	maxFieldSegments = 32
)

// fieldPath is a parsed dot path.
type fieldPath []string

func parseFieldPath(flag, p string) (fieldPath, error) {
	switch {
	case p == "":
		return nil, nil
	case len(p) > maxFieldPath:
		return nil, fmt.Errorf("%s: %d characters, more than %d", flag, len(p), maxFieldPath)
	}
	segs := strings.Split(p, ".")
	if len(segs) > maxFieldSegments {
		return nil, fmt.Errorf("%s %q: %d segments, more than %d", flag, p, len(segs), maxFieldSegments)
	}
	for _, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("%s %q: an empty segment; write the keys separated by single dots", flag, p)
		}
	}
	return segs, nil
}

// lookup follows the path through v; ok is false when a segment names
// nothing, and err set when the value is there but not a string.
func (fp fieldPath) lookup(v any) (s string, ok bool, err error) {
	for _, seg := range fp {
		switch node := v.(type) {
		case map[string]any:
			v, ok = node[seg]
		case []any:
			i, convErr := strconv.Atoi(seg)
			ok = convErr == nil && i >= 0 && i < len(node)
			if ok {
				v = node[i]
			}
		default:
			ok = false
		}
		if !ok {
			return "", false, nil
		}
	}
	switch x := v.(type) {
	case string:
		return x, true, nil
	case nil:
		return "", false, nil
	default:
		return "", true, malformed("%s holds a JSON %s where a string was expected", strings.Join(fp, "."), jsonKind(x))
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case float64, json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "value"
}

// genericFormat is the format of the generic source for a mapping.
func genericFormat(m GenericMapping) (format, error) {
	repo, err := parseFieldPath("repository field", m.Repository)
	if err != nil {
		return format{}, err
	}
	if repo == nil {
		return format{}, fmt.Errorf("the generic webhook needs the field that names the repository")
	}
	tag, err := parseFieldPath("tag field", m.Tag)
	if err != nil {
		return format{}, err
	}
	return format{auth: authHeaderOrQuery, parse: func(r *http.Request, body []byte) ([]imageref.Reference, error) {
		return parseGeneric(repo, tag, r, body)
	}}, nil
}

func parseGeneric(repoPath, tagPath fieldPath, r *http.Request, body []byte) ([]imageref.Reference, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, malformed("invalid JSON: %v", err)
	}
	field := strings.Join(repoPath, ".")
	name, ok, err := repoPath.lookup(v)
	switch {
	case err != nil:
		return nil, err
	case !ok || name == "":
		return nil, malformed("%s, the repository field of the mapping, is missing", field)
	}
	var tag string
	if tagPath != nil {
		if tag, _, err = tagPath.lookup(v); err != nil {
			return nil, err
		}
	}
	host, err := registryURL(r)
	if err != nil {
		return nil, err
	}
	ref, err := repository(host, name, tag, field)
	if err != nil {
		return nil, err
	}
	return []imageref.Reference{ref}, nil
}
