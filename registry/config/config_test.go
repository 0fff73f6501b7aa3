package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

const seed003 = `registries:
- name: ECR
  api_url: https://123456789012.dkr.ecr.ap-northeast-1.amazonaws.com
  prefix: 123456789012.dkr.ecr.ap-northeast-1.amazonaws.com
  credentials: ext:/app/scripts/ecr-login.sh
  credsexpire: 10h
`

func TestParseSeed003(t *testing.T) {
	cfg, err := Parse("registries.conf", []byte(seed003))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := imageref.Parse("123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app:1.0")
	if err != nil {
		t.Fatal(err)
	}
	want := Endpoint{
		Name:        "ECR",
		Prefix:      "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com",
		APIURL:      "https://123456789012.dkr.ecr.ap-northeast-1.amazonaws.com",
		Credentials: "ext:/app/scripts/ecr-login.sh",
		CredsExpire: 10 * time.Hour,
	}
	if got := cfg.EndpointFor(ref); got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got := cfg.endpoint(ref.Registry()); got != want {
		t.Fatalf("Endpoint: %+v", got)
	}
}

func TestParseFields(t *testing.T) {
	const file = `# every field
registries:
- name: Docker Hub
  prefix: docker.io
  api_url: https://registry-1.docker.io/
  credentials: secret:argocd/dockerhub#creds
  credsexpire: 1h30m
  limit: 2.5
  defaultns: library
  default: true
  ping: yes
- name: GitHub
  prefix: ghcr.io/
  credentials: " pullsecret:argocd/ghcr "
  insecure: true
  tagsortmode: latest-first
  limit: 7
- name: Internal
  prefix: registry.internal:5000/team
  api_url: http://registry.internal:5000
  insecure: false
  tagsortmode: latest-last
  mutabletags: true
  credsexpire: 0
  credentials:
  default: false
  ping: false
  internal_hosts: [auth.registry.internal, "LOCALHOST:5001", "[::1]:5002", 10.0.0.5, "::1"]
`
	cfg, err := Parse("registries.conf", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []Endpoint{
		{Name: "Docker Hub", Prefix: "docker.io", APIURL: "https://registry-1.docker.io", Credentials: "secret:argocd/dockerhub#creds",
			CredsExpire: 90 * time.Minute, Limit: 2.5, DefaultNS: "library", Default: true},
		{Name: "GitHub", Prefix: "ghcr.io/", APIURL: "https://ghcr.io", Credentials: "pullsecret:argocd/ghcr", Insecure: true,
			TagSortMode: TagSortLatestFirst, Limit: 7},
		{Name: "Internal", Prefix: "registry.internal:5000/team", APIURL: "http://registry.internal:5000", TagSortMode: TagSortLatestLast,
			MutableTags: true, InternalHosts: "auth.registry.internal,localhost:5001,[::1]:5002,10.0.0.5,::1"},
	}
	got := cfg.endpoints()
	if len(got) != len(want) {
		t.Fatalf("got %d endpoints", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d:\ngot  %+v\nwant %+v", i, got[i], want[i])
		}
	}
	def, ok := cfg.defaultEndpoint()
	if !ok || def.Name != "Docker Hub" {
		t.Errorf("defaultEndpoint: %+v %v", def, ok)
	}
	// endpoints returns a copy.
	got[0].Name = "changed"
	if cfg.endpoints()[0].Name != "Docker Hub" {
		t.Error("endpoints exposes the config's own slice")
	}
}

func TestParseEmpty(t *testing.T) {
	for _, in := range []string{"", "\n", "---\n", "# nothing\n", "registries:\n", "registries: []\n", "registries: null\n", "~\n"} {
		cfg, err := Parse("registries.conf", []byte(in))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if len(cfg.endpoints()) != 0 {
			t.Errorf("%q: %d endpoints", in, len(cfg.endpoints()))
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // one per reported error, in order
	}{
		{"unknown field", "registries:\n- name: a\n  prefix: a.io\n  colour: blue\n",
			[]string{"registries.conf:4: registries[0].colour: unknown field (known: name, prefix, api_url,"}},
		{"missing name and prefix", "registries:\n- api_url: https://a.io\n",
			[]string{"registries.conf:2: registries[0].name: required field is missing", "registries.conf:2: registries[0].prefix: required field is missing"}},
		{"empty name", "registries:\n- prefix: a.io\n  name: \"\"\n",
			[]string{`registries.conf:3: registries[0].name: required field is empty`}},
		{"null prefix", "registries:\n- name: a\n  prefix:\n",
			[]string{`registries.conf:3: registries[0].prefix: required field is empty`}},
		{"duplicate prefix", "registries:\n- name: a\n  prefix: ghcr.io\n- name: b\n  prefix: ghcr.io/\n",
			[]string{`registries.conf:5: registries[1].prefix: duplicate prefix "ghcr.io/": registries[0] at line 3 already has "ghcr.io"`}},
		{"duplicate Docker Hub alias", "registries:\n- name: a\n  prefix: docker.io\n- name: b\n  prefix: index.docker.io\n",
			[]string{`registries.conf:5: registries[1].prefix: duplicate prefix "index.docker.io": registries[0] at line 3 already has "docker.io"`}},
		{"two defaults", "registries:\n- name: a\n  prefix: a.io\n  default: true\n- name: b\n  prefix: b.io\n  default: true\n",
			[]string{"registries.conf:7: registries[1].default: only one registry may be the default: registries[0] at line 4 already is"}},
		{"api_url without scheme", "registries:\n- name: a\n  prefix: a.io\n  api_url: ghcr.io\n",
			[]string{`registries.conf:4: registries[0].api_url: "ghcr.io" is not an absolute http(s) URL`}},
		{"api_url ftp", "registries:\n- name: a\n  prefix: a.io\n  api_url: ftp://a.io\n",
			[]string{`registries.conf:4: registries[0].api_url: "ftp://a.io" is not an absolute http(s) URL`}},
		{"api_url no host", "registries:\n- name: a\n  prefix: a.io\n  api_url: https:///v2\n",
			[]string{`registries.conf:4: registries[0].api_url: "https:///v2" is not an absolute http(s) URL`}},
		{"bad duration", "registries:\n- name: a\n  prefix: a.io\n- name: b\n  prefix: b.io\n  credsexpire: 10x\n",
			[]string{`registries.conf:6: registries[1].credsexpire: invalid duration "10x": time: unknown unit "x" in duration "10x"`}},
		{"duration without unit", "registries:\n- name: a\n  prefix: a.io\n  credsexpire: 3600\n",
			[]string{`registries.conf:4: registries[0].credsexpire: invalid duration "3600"`}},
		{"negative duration", "registries:\n- name: a\n  prefix: a.io\n  credsexpire: -1h\n",
			[]string{`registries.conf:4: registries[0].credsexpire: duration "-1h" must not be negative`}},
		{"negative limit", "registries:\n- name: a\n  prefix: a.io\n  limit: -1\n",
			[]string{"registries.conf:4: registries[0].limit: must not be negative, got -1"}},
		{"limit not a number", "registries:\n- name: a\n  prefix: a.io\n  limit: fast\n",
			[]string{`registries.conf:4: registries[0].limit: expected a number, got "fast"`}},
		{"limit NaN", "registries:\n- name: a\n  prefix: a.io\n  limit: .nan\n",
			[]string{"registries.conf:4: registries[0].limit: must be a finite number, got .nan"}},
		{"bad tagsortmode", "registries:\n- name: a\n  prefix: a.io\n  tagsortmode: sideways\n",
			[]string{`registries.conf:4: registries[0].tagsortmode: invalid tagsortmode "sideways" (want none, latest-first or latest-last)`}},
		{"bad credentials", "registries:\n- name: a\n  prefix: a.io\n  credentials: vault:x\n",
			[]string{`registries.conf:4: registries[0].credentials: invalid credential reference "<redacted>": unknown kind; want one of`}},
		{"relative ext", "registries:\n- name: a\n  prefix: a.io\n  credentials: ext:login.sh\n",
			[]string{`registries.conf:4: registries[0].credentials: invalid credential reference "ext:<redacted>": the script path is not absolute`}},
		{"internal_hosts not a list", "registries:\n- name: a\n  prefix: a.io\n  internal_hosts: auth.a.io\n",
			[]string{`registries.conf:4: registries[0].internal_hosts: expected a list of host or host:port, got "auth.a.io"`}},
		{"internal_hosts with a URL, a path, a bad port", "registries:\n- name: a\n  prefix: a.io\n  internal_hosts:\n  - https://auth.a.io\n  - auth.a.io/token\n  - auth.a.io:0\n  - [x]\n  - auth_a.io\n",
			[]string{
				`registries.conf:5: registries[0].internal_hosts[0]: "https://auth.a.io" is not a host or host:port (no scheme, path or user)`,
				`registries.conf:6: registries[0].internal_hosts[1]: "auth.a.io/token" is not a host or host:port`,
				`registries.conf:7: registries[0].internal_hosts[2]: "auth.a.io:0" has no port from 1 to 65535 after its ':'`,
				`registries.conf:8: registries[0].internal_hosts[3]: expected a host or host:port, got a list`,
				`registries.conf:9: registries[0].internal_hosts[4]: "auth_a.io" is not a host or host:port`,
			}},
		{"registries not a list", "registries:\n  name: a\n",
			[]string{"registries.conf:2: registries: expected a list, got a mapping"}},
		{"entry not a mapping", "registries:\n- ghcr.io\n",
			[]string{`registries.conf:2: registries[0]: expected a mapping, got "ghcr.io"`}},
		{"name not a string", "registries:\n- name: [a]\n  prefix: a.io\n",
			[]string{"registries.conf:2: registries[0].name: expected a string, got a list"}},
		{"insecure not a bool", "registries:\n- name: a\n  prefix: a.io\n  insecure: maybe\n",
			[]string{`registries.conf:4: registries[0].insecure: expected true or false, got "maybe"`}},
		{"default not a bool", "registries:\n- name: a\n  prefix: a.io\n  default: {x: 1}\n",
			[]string{"registries.conf:4: registries[0].default: expected true or false, got a mapping"}},
		{"top level list", "- name: a\n",
			[]string{"registries.conf:1: expected a mapping with the key registries, got a list"}},
		{"top level unknown key", "registry:\n- name: a\n",
			[]string{"registries.conf:1: registry: unknown field (the file holds only registries)"}},
		{"field twice", "registries:\n- name: a\n  prefix: a.io\n  name: b\n",
			[]string{"registries.conf:4: registries[0].name: given twice (first at line 2)"}},
		{"prefix with scheme", "registries:\n- name: a\n  prefix: https://ghcr.io\n",
			[]string{`registries.conf:3: registries[0].prefix: prefix "https://ghcr.io" must not have a URL scheme`}},
		{"prefix not a host", "registries:\n- name: a\n  prefix: myregistry\n",
			[]string{`registries.conf:3: registries[0].prefix: prefix "myregistry" does not start with a registry host`}},
		{"prefix bad path", "registries:\n- name: a\n  prefix: ghcr.io/MyOrg\n",
			[]string{`registries.conf:3: registries[0].prefix: prefix "ghcr.io/MyOrg": invalid repository "MyOrg"`}},
		{"bad defaultns", "registries:\n- name: a\n  prefix: a.io\n  defaultns: Lib\n",
			[]string{`registries.conf:4: registries[0].defaultns: invalid namespace "Lib"`}},
		{"yaml syntax", "registries:\n- name: a\n  prefix: [\n",
			[]string{"registries.conf:3: invalid YAML: did not find expected node content"}},
		{"yaml control characters", "registries:\x01\n",
			[]string{"registries.conf: invalid YAML: control characters are not allowed"}},
		{"several entries, all reported", "registries:\n- name: a\n  prefix: a.io\n  limit: -2\n- prefix: b.io\n- name: c\n  prefix: c.io\n  credsexpire: soon\n  insecure: 3\n",
			[]string{
				"registries.conf:4: registries[0].limit: must not be negative",
				"registries.conf:5: registries[1].name: required field is missing",
				`registries.conf:8: registries[2].credsexpire: invalid duration "soon"`,
				`registries.conf:9: registries[2].insecure: expected true or false, got "3"`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("registries.conf", []byte(tt.in))
			if err == nil {
				t.Fatalf("no error; got %+v", cfg.endpoints())
			}
			if cfg != nil {
				t.Error("a config came with the error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("not ErrInvalid: %v", err)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "registries.conf" {
				t.Errorf("no *Error: %#v", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %d:\ngot  %s\nwant %s...", i, lines[i], w)
				}
			}
		})
	}
}

func TestErrorWrapsRefError(t *testing.T) {
	_, err := Parse("r.conf", []byte("registries:\n- name: a\n  prefix: a.io\n  credentials: \"env:\"\n"))
	if !errors.Is(err, credref.ErrInvalidRef) {
		t.Fatalf("got %v", err)
	}
}

func TestConfigEndpointMatching(t *testing.T) {
	const file = `registries:
- name: GHCR
  prefix: ghcr.io
  credentials: pullsecret:argocd/ghcr
- name: GHCR org
  prefix: ghcr.io/myorg
  credentials: pullsecret:argocd/myorg
- name: GHCR team
  prefix: ghcr.io/myorg/team/
- name: Hub
  prefix: index.docker.io
  credentials: env:HUB
- name: Local
  prefix: localhost:5000
  api_url: http://localhost:5000
  insecure: true
`
	cfg, err := Parse("registries.conf", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	byHost := []struct{ host, name, api, ns string }{
		{"ghcr.io", "GHCR", "https://ghcr.io", ""},
		{"GHCR.io", "GHCR", "https://ghcr.io", ""},
		{"docker.io", "Hub", "https://registry-1.docker.io", "library"},
		{"registry-1.docker.io", "Hub", "https://registry-1.docker.io", "library"},
		{"localhost:5000", "Local", "http://localhost:5000", ""},
		{"quay.io", "quay.io", "https://quay.io", ""},
		{"localhost:5001", "localhost:5001", "https://localhost:5001", ""},
	}
	for _, tt := range byHost {
		ep := cfg.endpoint(tt.host)
		if ep.Name != tt.name || ep.APIURL != tt.api || ep.DefaultNS != tt.ns {
			t.Errorf("Endpoint(%q) = %+v, want name %q api %q ns %q", tt.host, ep, tt.name, tt.api, tt.ns)
		}
	}
	byRef := []struct{ ref, name string }{
		{"ghcr.io/myorg/app", "GHCR org"},
		{"ghcr.io/myorg/team/app:v1", "GHCR team"},
		{"ghcr.io/myorg/teamster/app", "GHCR org"},
		{"ghcr.io/myorganic/app", "GHCR"},
		{"ghcr.io/other/app", "GHCR"},
		{"nginx", "Hub"},
		{"docker.io/org/app", "Hub"},
		{"quay.io/x/y", "quay.io"},
		{"localhost:5000/app", "Local"},
	}
	for _, tt := range byRef {
		ref, err := imageref.Parse(tt.ref)
		if err != nil {
			t.Fatal(err)
		}
		if ep := cfg.EndpointFor(ref); ep.Name != tt.name {
			t.Errorf("EndpointFor(%q) = %q, want %q", tt.ref, ep.Name, tt.name)
		}
	}
	if def, ok := cfg.defaultEndpoint(); ok || def.Name != "Hub" {
		t.Errorf("without a default entry Docker Hub's entry is the default: %+v %v", def, ok)
	}
	if len(cfg.ReferenceOptions()) != 0 {
		t.Error("no options when Docker Hub is the default")
	}
}

func TestConfigInference(t *testing.T) {
	hub := Endpoint{Name: "Docker Hub", Prefix: "docker.io", APIURL: "https://registry-1.docker.io", DefaultNS: "library"}
	for _, cfg := range []*Config{nil, {}} {
		for _, host := range []string{"docker.io", "index.docker.io", "registry-1.docker.io", ""} {
			if got := cfg.endpoint(host); got != hub {
				t.Errorf("Endpoint(%q) = %+v", host, got)
			}
		}
		if got := cfg.endpoint("ghcr.io"); got != (Endpoint{Name: "ghcr.io", Prefix: "ghcr.io", APIURL: "https://ghcr.io"}) {
			t.Errorf("Endpoint(ghcr.io) = %+v", got)
		}
		if got, ok := cfg.defaultEndpoint(); ok || got != hub {
			t.Errorf("defaultEndpoint = %+v, %v", got, ok)
		}
		if got := cfg.EndpointFor(imageref.Reference{}); got != hub {
			t.Errorf("EndpointFor(zero) = %+v", got)
		}
		if cfg.endpoints() != nil && len(cfg.endpoints()) != 0 {
			t.Error("endpoints of an empty config")
		}
	}
}

func TestConfigDefaultRegistry(t *testing.T) {
	const file = `registries:
- name: Hub
  prefix: docker.io
- name: Internal
  prefix: registry.example.com
  defaultns: team
  default: true
`
	cfg, err := Parse("registries.conf", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	def, ok := cfg.defaultEndpoint()
	if !ok || def.Name != "Internal" {
		t.Fatalf("defaultEndpoint: %+v %v", def, ok)
	}
	if cfg.endpoint("") != def {
		t.Error("Endpoint(\"\") should be the default")
	}
	ref, err := imageref.Parse("app:1", cfg.ReferenceOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	if ref.String() != "registry.example.com/team/app:1" {
		t.Errorf("got %s", ref)
	}
	if cfg.EndpointFor(ref).Name != "Internal" {
		t.Errorf("EndpointFor: %+v", cfg.EndpointFor(ref))
	}
	// Docker Hub's entry gets its namespace even when the file omits it.
	if hub := cfg.endpoint("docker.io"); hub.DefaultNS != "library" || hub.APIURL != "https://registry-1.docker.io" {
		t.Errorf("configured Docker Hub: %+v", hub)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Load(filepath.Join(dir, "missing.conf"))
	if err != nil || len(cfg.endpoints()) != 0 {
		t.Fatalf("missing file: %v, %v", cfg, err)
	}
	path := filepath.Join(dir, "registries.conf")
	if err := os.WriteFile(path, []byte(seed003), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err = Load(path)
	if err != nil || len(cfg.endpoints()) != 1 {
		t.Fatalf("got %v, %v", cfg, err)
	}
	if err := os.WriteFile(path, []byte("registries:\n- name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+":2: registries[0].prefix") {
		t.Fatalf("errors name the path: %v", err)
	}
	if _, err := Load(dir); err == nil || errors.Is(err, ErrInvalid) {
		t.Fatalf("a directory is a read error: %v", err)
	}
}

func TestTagSortMode(t *testing.T) {
	for _, m := range []TagSortMode{TagSortNone, TagSortLatestFirst, TagSortLatestLast} {
		got, err := parseTagSortMode(m.String())
		if err != nil || got != m {
			t.Errorf("%v: %v %v", m, got, err)
		}
	}
	if TagSortMode(9).String() != "TagSortMode(9)" {
		t.Error("String of an unknown mode")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(seed003)
	f.Add("registries:\n- name: a\n  prefix: a.io\n  default: true\n- name: b\n  prefix: A.io/\n  default: true\n")
	f.Add("registries:\n- &x {name: a, prefix: docker.io}\n- *x\n")
	f.Add("registries:\n- name: a\n  prefix: ghcr.io/org\n  limit: 1e3\n  credsexpire: 1h\n  tagsortmode: latest-last\n  ping: [1]\n")
	f.Add("registries: [{name: x, prefix: index.docker.io}, {name: y, prefix: registry-1.docker.io}]")
	f.Add("a: &a [*a]\n")
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := Parse("f.conf", []byte(in))
		if err != nil {
			if cfg != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v with config %v", err, cfg)
			}
			return
		}
		seen := map[string]bool{}
		defaults := 0
		for _, e := range cfg.entries {
			if seen[e.match] {
				t.Fatalf("duplicate prefix %q accepted", e.match)
			}
			seen[e.match] = true
			if e.ep.Default {
				defaults++
			}
			if e.ep.Name == "" || e.ep.Prefix == "" || e.ep.Limit < 0 || e.ep.CredsExpire < 0 {
				t.Fatalf("invalid entry accepted: %+v", e.ep)
			}
		}
		if defaults > 1 {
			t.Fatalf("%d defaults accepted", defaults)
		}
	})
}
