package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/internal/safe"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// Load reads and parses the file at path. A missing file is an empty
// configuration: every registry is then inferred from image names.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading registries configuration: %w", err)
	}
	return Parse(path, data)
}

// Parse parses registries.conf content; filename is used in error
// messages only. An empty document is an empty configuration. All problems
// found are returned together, each as a *Error naming file, line and
// field.
func Parse(filename string, data []byte) (*Config, error) {
	p := configParser{file: filename}
	var doc yaml.Node
	if err := unmarshalYAML(data, &doc); err != nil {
		return nil, yamlSyntaxError(filename, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return &Config{}, nil
		}
		root = root.Content[0]
	}
	root = deref(root)
	if root.Kind == 0 || isNull(root) {
		return &Config{}, nil
	}
	if root.Kind != yaml.MappingNode {
		p.errorf(root, "", "expected a mapping with the key registries, got %s", kindName(root))
		return nil, p.result()
	}

	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := deref(root.Content[i]), deref(root.Content[i+1])
		switch {
		case k.Kind != yaml.ScalarNode || k.Value != "registries":
			p.errorf(k, scalarOr(k, "?"), "unknown field (the file holds only registries)")
		case list != nil:
			p.errorf(k, "registries", "given twice")
		default:
			list = v
		}
	}
	if list == nil || isNull(list) {
		if len(p.errs) > 0 {
			return nil, p.result()
		}
		return &Config{}, nil
	}
	if list.Kind != yaml.SequenceNode {
		p.errorf(list, "registries", "expected a list, got %s", kindName(list))
		return nil, p.result()
	}

	cfg := &Config{}
	type seenAt struct {
		index int
		line  int
		value string
	}
	prefixes := map[string]seenAt{}
	var firstDefault *seenAt
	for i, n := range list.Content {
		e, ok := p.entry(i, deref(n))
		if !ok {
			continue
		}
		path := fmt.Sprintf("registries[%d]", i)
		if prev, dup := prefixes[e.match]; dup {
			p.errorf(e.prefixNode, path+".prefix", "duplicate prefix %q: registries[%d] at line %d already has %q", e.ep.Prefix, prev.index, prev.line, prev.value)
			continue
		}
		prefixes[e.match] = seenAt{index: i, line: e.prefixNode.Line, value: e.ep.Prefix}
		if e.ep.Default {
			if firstDefault != nil {
				p.errorf(e.defaultNode, path+".default", "only one registry may be the default: registries[%d] at line %d already is", firstDefault.index, firstDefault.line)
				continue
			}
			firstDefault = &seenAt{index: i, line: e.defaultNode.Line}
		}
		cfg.entries = append(cfg.entries, configEntry{ep: e.ep, match: e.match})
	}
	for _, f := range p.files {
		if !slices.Contains(cfg.files, f) {
			cfg.files = append(cfg.files, f)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.result()
	}
	return cfg, nil
}

// unmarshalYAML parses into a node tree. It turns a panic of the YAML
// library on hostile input into an error, so that a bad ConfigMap can never
// take the controller down.
func unmarshalYAML(data []byte, n *yaml.Node) error {
	return safe.Call(func() error { return yaml.Unmarshal(data, n) })
}

// yamlLineRE picks the line out of the YAML library's syntax errors, so
// that they read like every other error of the file.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func yamlSyntaxError(filename string, err error) *Error {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		if line, convErr := strconv.Atoi(m[1]); convErr == nil {
			return &Error{File: filename, Line: line, Err: fmt.Errorf("invalid YAML: %s", m[2])}
		}
	}
	return &Error{File: filename, Err: fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))}
}

type configParser struct {
	file  string
	errs  []*Error
	files []string // read for the entries, broken ones too
}

func (p *configParser) errorf(n *yaml.Node, field, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: n.Line, Field: field, Err: fmt.Errorf(format, args...)})
}

func (p *configParser) result() error {
	sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

type parsedEntry struct {
	ep          Endpoint
	match       string
	prefixNode  *yaml.Node
	defaultNode *yaml.Node
}

var entryFields = []string{"name", "prefix", "api_url", "credentials", "credsexpire", "insecure", "limit", "defaultns", "default", "tagsortmode",
	"mutabletags", "ca_file", "ca_data", "client_cert_file", "client_key_file", "internal_hosts", "pushtimes", "pushtimes_url", "ping"}

// entry parses registries[i]. ok is false when it had errors (already
// recorded), so that it takes no part in the duplicate checks.
func (p *configParser) entry(i int, n *yaml.Node) (parsedEntry, bool) {
	path := fmt.Sprintf("registries[%d]", i)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "expected a mapping, got %s", kindName(n))
		return parsedEntry{}, false
	}
	before := len(p.errs)
	var e parsedEntry
	var nameNode *yaml.Node
	var tlsNodes tlsFields
	seen := map[string]*yaml.Node{}
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := deref(n.Content[j]), deref(n.Content[j+1])
		key := scalarOr(k, "?")
		f := path + "." + key
		if k.Kind != yaml.ScalarNode || !isEntryField(key) {
			p.errorf(k, f, "unknown field (known: %s)", strings.Join(entryFields, ", "))
			continue
		}
		if prev := seen[key]; prev != nil {
			p.errorf(k, f, "given twice (first at line %d)", prev.Line)
			continue
		}
		seen[key] = k
		switch key {
		case "name":
			e.ep.Name = p.str(v, f)
			nameNode = v
		case "prefix":
			e.ep.Prefix = p.str(v, f)
			e.prefixNode = v
		case "api_url":
			e.ep.APIURL = p.apiURL(v, f)
		case "credentials":
			e.ep.Credentials = p.credentials(v, f)
		case "credsexpire":
			e.ep.CredsExpire = p.duration(v, f)
		case "insecure":
			e.ep.Insecure = p.boolean(v, f)
		case "limit":
			e.ep.Limit = p.number(v, f)
		case "mutabletags":
			e.ep.MutableTags = p.boolean(v, f)
		case "defaultns":
			e.ep.DefaultNS = p.namespace(v, f)
		case "default":
			e.ep.Default = p.boolean(v, f)
			e.defaultNode = v
		case "tagsortmode":
			s := p.str(v, f)
			m, err := parseTagSortMode(s)
			if err != nil {
				p.errorf(v, f, "%v", err)
			}
			e.ep.TagSortMode = m
		case "ca_file":
			tlsNodes.caFile = v
		case "ca_data":
			tlsNodes.caData = v
		case "client_cert_file":
			tlsNodes.certFile = v
		case "client_key_file":
			tlsNodes.keyFile = v
		case "internal_hosts":
			e.ep.InternalHosts = p.hosts(v, f)
		case "pushtimes":
			if s := p.str(v, f); s != "" {
				api, err := parsePushTimes(s)
				if err != nil {
					p.errorf(v, f, "%v", err)
				}
				e.ep.PushTimes = api
			}
		case "pushtimes_url":
			e.ep.PushTimesURL = p.apiURL(v, f)
		case "ping":
			// Read by older versions; nothing to do with it.
		}
	}
	var files []string
	e.ep.TLS, files = p.tls(path, tlsNodes)
	p.files = append(p.files, files...)
	for _, req := range []struct {
		key, value string
		node       *yaml.Node
	}{{"name", strings.TrimSpace(e.ep.Name), nameNode}, {"prefix", e.ep.Prefix, e.prefixNode}} {
		switch {
		case req.value != "":
		case req.node == nil:
			p.errorf(n, path+"."+req.key, "required field is missing")
		case req.node.Kind == yaml.ScalarNode:
			// Non-scalars were reported as having the wrong type.
			p.errorf(req.node, path+"."+req.key, "required field is empty")
		}
	}
	if e.ep.Prefix != "" {
		if m, err := imageref.ParsePrefix(e.ep.Prefix); err != nil {
			p.errorf(e.prefixNode, path+".prefix", "%v", err)
		} else {
			e.match = m
		}
	}
	if len(p.errs) > before {
		return parsedEntry{}, false
	}
	host, _, _ := strings.Cut(e.match, "/")
	if e.ep.APIURL == "" {
		e.ep.APIURL = inferEndpoint(host).APIURL
	}
	if e.ep.DefaultNS == "" && host == imageref.DockerHub {
		e.ep.DefaultNS = imageref.DockerHubNamespace
	}
	return e, true
}

func isEntryField(key string) bool {
	for _, f := range entryFields {
		if f == key {
			return true
		}
	}
	return false
}

func (p *configParser) scalar(v *yaml.Node, f, want string) (string, bool) {
	if isNull(v) {
		return "", false
	}
	if v.Kind != yaml.ScalarNode {
		p.errorf(v, f, "expected %s, got %s", want, kindName(v))
		return "", false
	}
	return v.Value, true
}

func (p *configParser) str(v *yaml.Node, f string) string {
	s, _ := p.scalar(v, f, "a string")
	return s
}

func (p *configParser) boolean(v *yaml.Node, f string) bool {
	if _, ok := p.scalar(v, f, "true or false"); !ok {
		return false
	}
	var b bool
	if err := v.Decode(&b); err != nil {
		p.errorf(v, f, "expected true or false, got %q", v.Value)
	}
	return b
}

func (p *configParser) number(v *yaml.Node, f string) float64 {
	if _, ok := p.scalar(v, f, "a number"); !ok {
		return 0
	}
	var x float64
	if err := v.Decode(&x); err != nil {
		p.errorf(v, f, "expected a number, got %q", v.Value)
		return 0
	}
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		p.errorf(v, f, "must be a finite number, got %s", v.Value)
	case x < 0:
		p.errorf(v, f, "must not be negative, got %s", v.Value)
	default:
		return x
	}
	return 0
}

func (p *configParser) duration(v *yaml.Node, f string) time.Duration {
	s, ok := p.scalar(v, f, "a duration such as 10h")
	if !ok || s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.errorf(v, f, "invalid duration %q: %v", s, err)
		return 0
	}
	if d < 0 {
		p.errorf(v, f, "duration %q must not be negative", s)
		return 0
	}
	return d
}

func (p *configParser) apiURL(v *yaml.Node, f string) string {
	s, ok := p.scalar(v, f, "a URL")
	if !ok || s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.errorf(v, f, "%q is not an absolute http(s) URL", s)
		return ""
	}
	return strings.TrimRight(s, "/")
}

// hosts reads a list of host or host:port, without scheme or path; names
// in lower case.
func (p *configParser) hosts(v *yaml.Node, f string) Hosts {
	if isNull(v) {
		return ""
	}
	if v.Kind != yaml.SequenceNode {
		p.errorf(v, f, "expected a list of host or host:port, got %s", kindName(v))
		return ""
	}
	var out []string
	for i, n := range v.Content {
		n = deref(n)
		fi := fmt.Sprintf("%s[%d]", f, i)
		s, ok := p.scalar(n, fi, "a host or host:port")
		if !ok {
			continue
		}
		h, err := parseHost(s)
		if err != nil {
			p.errorf(n, fi, "%q %v", s, err)
			continue
		}
		out = append(out, h)
	}
	return Hosts(strings.Join(out, ","))
}

// hostNameRE is a DNS name: labels of letters, digits and '-'.
var hostNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)

var errNotHost = errors.New("is not a host or host:port (no scheme, path or user)")

// parseHost checks a host or host:port and gives it in lower case.
func parseHost(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || strings.ContainsAny(s, "/@?#") {
		return "", errNotHost
	}
	name, port := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		name, port = h, p
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", errors.New("has no port from 1 to 65535 after its ':'")
		}
	}
	if _, err := netip.ParseAddr(name); err == nil {
		if port != "" {
			return net.JoinHostPort(name, port), nil
		}
		return name, nil
	}
	if !hostNameRE.MatchString(strings.TrimSuffix(name, ".")) {
		return "", errNotHost
	}
	return s, nil
}

func (p *configParser) credentials(v *yaml.Node, f string) string {
	s, ok := p.scalar(v, f, "a credential reference")
	if !ok || strings.TrimSpace(s) == "" {
		return ""
	}
	if _, err := credref.ParseRef(s); err != nil {
		p.errorf(v, f, "%w", err)
		return ""
	}
	return strings.TrimSpace(s)
}

func (p *configParser) namespace(v *yaml.Node, f string) string {
	s, ok := p.scalar(v, f, "a string")
	if !ok || s == "" {
		return ""
	}
	if err := imageref.CheckPath(s); err != nil {
		p.errorf(v, f, "invalid namespace %q: lower-case letters and digits, separated by '.', '_', '__', '-' or '/'", s)
		return ""
	}
	return s
}

// deref follows a YAML alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func scalarOr(n *yaml.Node, alt string) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return alt
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}
