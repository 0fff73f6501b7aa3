package imageref

import (
	"errors"
	"strings"
	"testing"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParse(t *testing.T) {
	tests := []struct {
		in                         string
		opts                       []Option
		registry, repository       string
		tag, digest, canonicalForm string
	}{
		{in: "nginx", registry: "docker.io", repository: "library/nginx", canonicalForm: "docker.io/library/nginx"},
		{in: "nginx:1.25", registry: "docker.io", repository: "library/nginx", tag: "1.25", canonicalForm: "docker.io/library/nginx:1.25"},
		{in: "org/app", registry: "docker.io", repository: "org/app", canonicalForm: "docker.io/org/app"},
		{in: "docker.io/nginx", registry: "docker.io", repository: "library/nginx", canonicalForm: "docker.io/library/nginx"},
		{in: "index.docker.io/library/nginx:latest", registry: "docker.io", repository: "library/nginx", tag: "latest", canonicalForm: "docker.io/library/nginx:latest"},
		{in: "registry-1.docker.io/org/app", registry: "docker.io", repository: "org/app", canonicalForm: "docker.io/org/app"},
		{in: "ghcr.io/org/app:v1.2.3", registry: "ghcr.io", repository: "org/app", tag: "v1.2.3", canonicalForm: "ghcr.io/org/app:v1.2.3"},
		{in: "quay.io/org/sub/app", registry: "quay.io", repository: "org/sub/app", canonicalForm: "quay.io/org/sub/app"},
		{in: "GHCR.IO/org/app", registry: "ghcr.io", repository: "org/app", canonicalForm: "ghcr.io/org/app"},
		{in: "localhost:5000/app:v1", registry: "localhost:5000", repository: "app", tag: "v1", canonicalForm: "localhost:5000/app:v1"},
		{in: "localhost/app", registry: "localhost", repository: "app", canonicalForm: "localhost/app"},
		{in: "[::1]:5000/app:v1", registry: "[::1]:5000", repository: "app", tag: "v1", canonicalForm: "[::1]:5000/app:v1"},
		{in: "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app:1.0", registry: "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com", repository: "eks-app", tag: "1.0", canonicalForm: "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app:1.0"},
		{in: "europe-docker.pkg.dev/proj/repo/img_x:1__a", registry: "europe-docker.pkg.dev", repository: "proj/repo/img_x", tag: "1__a", canonicalForm: "europe-docker.pkg.dev/proj/repo/img_x:1__a"},
		{in: "nginx@" + testDigest, registry: "docker.io", repository: "library/nginx", digest: testDigest, canonicalForm: "docker.io/library/nginx@" + testDigest},
		{in: "nginx:1.25@" + testDigest, registry: "docker.io", repository: "library/nginx", tag: "1.25", digest: testDigest, canonicalForm: "docker.io/library/nginx:1.25@" + testDigest},
		{in: "localhost:5000/a/b:v1@" + testDigest, registry: "localhost:5000", repository: "a/b", tag: "v1", digest: testDigest, canonicalForm: "localhost:5000/a/b:v1@" + testDigest},
		{in: "host:5000", registry: "docker.io", repository: "library/host", tag: "5000", canonicalForm: "docker.io/library/host:5000"},
		// library/ is Docker Hub's namespace of single names only: on any
		// other registry it is a path element like another, kept as written
		// (upstream main #1783).
		{in: "harbor.example.com/library/test-image:0.1", registry: "harbor.example.com", repository: "library/test-image", tag: "0.1", canonicalForm: "harbor.example.com/library/test-image:0.1"},
		{in: "harbor.example.com/library/nested/test-image", registry: "harbor.example.com", repository: "library/nested/test-image", canonicalForm: "harbor.example.com/library/nested/test-image"},
		{in: "localhost:5000/library/app", registry: "localhost:5000", repository: "library/app", canonicalForm: "localhost:5000/library/app"},
		{in: "harbor.example.com/app", registry: "harbor.example.com", repository: "app", canonicalForm: "harbor.example.com/app"},

		{in: "app", opts: []Option{WithDefaultRegistry("registry.example.com")}, registry: "registry.example.com", repository: "app", canonicalForm: "registry.example.com/app"},
		{in: "app:1", opts: []Option{WithDefaultRegistry("registry.example.com"), WithDefaultNamespace("team")}, registry: "registry.example.com", repository: "team/app", tag: "1", canonicalForm: "registry.example.com/team/app:1"},
		{in: "org/app", opts: []Option{WithDefaultRegistry("registry.example.com"), WithDefaultNamespace("team")}, registry: "registry.example.com", repository: "org/app", canonicalForm: "registry.example.com/org/app"},
		{in: "ghcr.io/app", opts: []Option{WithDefaultRegistry("registry.example.com"), WithDefaultNamespace("team")}, registry: "ghcr.io", repository: "app", canonicalForm: "ghcr.io/app"},
		{in: "app", opts: []Option{WithDefaultRegistry("registry.example.com/base/")}, registry: "registry.example.com", repository: "base/app", canonicalForm: "registry.example.com/base/app"},
		{in: "nginx", opts: []Option{WithDefaultRegistry("index.docker.io"), WithDefaultNamespace("library")}, registry: "docker.io", repository: "library/nginx", canonicalForm: "docker.io/library/nginx"},
		{in: "app", opts: []Option{WithDefaultRegistry("localhost:5000")}, registry: "localhost:5000", repository: "app", canonicalForm: "localhost:5000/app"},
		{in: "library/app", opts: []Option{WithDefaultRegistry("harbor.example.com")}, registry: "harbor.example.com", repository: "library/app", canonicalForm: "harbor.example.com/library/app"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := Parse(tt.in, tt.opts...)
			if err != nil {
				t.Fatalf("ParseReference: %v", err)
			}
			got := [...]string{r.Registry(), r.Repository(), r.Tag(), r.Digest(), r.String(), r.Original(), r.Name()}
			want := [...]string{tt.registry, tt.repository, tt.tag, tt.digest, tt.canonicalForm, tt.in, tt.registry + "/" + tt.repository}
			if got != want {
				t.Errorf("got  %q\nwant %q", got, want)
			}
			again, err := Parse(r.String())
			if err != nil || !again.Equal(r) {
				t.Errorf("round trip of %q: %v, %v", r.String(), again, err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in     string
		opts   []Option
		reason string
	}{
		{in: "", reason: "empty reference"},
		{in: "https://ghcr.io/org/app", reason: "no URL scheme"},
		{in: "Nginx", reason: "repository can only contain"},
		{in: "nginx:", reason: "missing tag"},
		{in: "nginx@", reason: "missing digest"},
		{in: "nginx@sha256:abc", reason: "invalid digest"},
		{in: "nginx@md5:0123456789abcdef0123456789abcdef", reason: "invalid digest"},
		{in: "a@b@c", reason: "more than one '@'"},
		{in: "ghcr.io/", reason: "missing repository"},
		{in: ":tag", reason: "missing repository"},
		{in: "ghcr.io//app", reason: "invalid repository"},
		{in: "ghcr.io/app/", reason: "invalid repository"},
		{in: "org/a..b", reason: "invalid repository"},
		{in: "app:-bad", reason: "invalid tag"},
		{in: "app:has space", reason: "invalid tag"},
		{in: "app:" + strings.Repeat("x", 129), reason: "invalid tag"},
		{in: "bad_host.io:99999x/app", reason: "invalid"},
		{in: "app", opts: []Option{WithDefaultRegistry("notahost")}, reason: "default registry"},
		{in: "app", opts: []Option{WithDefaultRegistry("")}, reason: "default registry"},
		{in: "app", opts: []Option{WithDefaultNamespace("Bad")}, reason: "repository can only contain"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Parse(tt.in, tt.opts...)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(ErrInvalid) is false for %v", err)
			}
			var re *Error
			if !errors.As(err, &re) || re.Input != tt.in {
				t.Errorf("not a *Error for %q: %#v", tt.in, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, `"`+tt.in+`"`) || !strings.Contains(msg, tt.reason) {
				t.Errorf("message %q should name the input and contain %q", msg, tt.reason)
			}
		})
	}
}

func TestReferenceWithTagAndDigest(t *testing.T) {
	r, err := Parse("ghcr.io/org/app:v1@" + testDigest)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := r.WithTag("v2")
	if err != nil {
		t.Fatal(err)
	}
	if r2.String() != "ghcr.io/org/app:v2" || r2.Original() != "ghcr.io/org/app:v2" {
		t.Errorf("WithTag: %q (original %q)", r2.String(), r2.Original())
	}
	if r.Tag() != "v1" || r.Digest() != testDigest {
		t.Errorf("WithTag changed the receiver: %q", r.String())
	}
	r3, err := r2.WithDigest(testDigest)
	if err != nil {
		t.Fatal(err)
	}
	if r3.String() != "ghcr.io/org/app:v2@"+testDigest {
		t.Errorf("WithDigest: %q", r3.String())
	}
	for _, bad := range []string{"", "-x", "a b"} {
		if _, err := r.WithTag(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("WithTag(%q): %v", bad, err)
		}
	}
	for _, bad := range []string{"", "sha256:1", "x@" + testDigest} {
		if _, err := r.WithDigest(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("WithDigest(%q): %v", bad, err)
		}
	}
	if _, err := (Reference{}).WithTag("v1"); err == nil {
		t.Error("WithTag on the zero Reference should fail")
	}
	if !(Reference{}).IsZero() || r.IsZero() {
		t.Error("IsZero")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"nginx", "nginx:1.25", "org/app", "docker.io/nginx", "ghcr.io/org/app:v1@" + testDigest,
		"localhost:5000/app", "[::1]:5000/a/b:c", "a@b", "host:5000", "ghcr.io//x", "A/b", ":x", "@",
		"123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/eks-app:1.0",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, withDefaults bool) {
		var opts []Option
		if withDefaults {
			opts = []Option{WithDefaultRegistry("registry.example.com/base"), WithDefaultNamespace("team")}
		}
		r, err := Parse(s, opts...)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			return
		}
		if r.Original() != s {
			t.Fatalf("Original() = %q, want %q", r.Original(), s)
		}
		if r.OriginalName()+r.Version().suffix() != s {
			t.Fatalf("OriginalName %q and Version %q do not rebuild %q", r.OriginalName(), r.Version(), s)
		}
		if name, v := Split(s); name != r.OriginalName() || v != r.Version() {
			t.Fatalf("Split(%q) = %q, %+v; Parse gave %q, %+v", s, name, v, r.OriginalName(), r.Version())
		}
		if !r.MatchesName(r.String()) || !r.MatchesName(s) {
			t.Fatalf("%q does not match its own spellings", s)
		}
		again, err := Parse(r.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", r.String(), s, err)
		}
		if !again.Equal(r) || again.String() != r.String() {
			t.Fatalf("round trip of %q: %q became %q", s, r.String(), again.String())
		}
	})
}

func TestOriginalSpellingIsKept(t *testing.T) {
	r, err := Parse("nginx:1.25")
	if err != nil {
		t.Fatal(err)
	}
	if r.OriginalName() != "nginx" {
		t.Errorf("OriginalName = %q", r.OriginalName())
	}
	tests := []struct {
		v        Version
		original string
		str      string
	}{
		{Version{Tag: "1.26"}, "nginx:1.26", "docker.io/library/nginx:1.26"},
		{Version{Tag: "1.26", Digest: testDigest}, "nginx:1.26@" + testDigest, "docker.io/library/nginx:1.26@" + testDigest},
		{Version{Digest: testDigest}, "nginx@" + testDigest, "docker.io/library/nginx@" + testDigest},
	}
	for _, tt := range tests {
		got, err := r.WithVersion(tt.v)
		if err != nil {
			t.Fatalf("WithVersion(%+v): %v", tt.v, err)
		}
		if got.Original() != tt.original || got.String() != tt.str || got.Version() != tt.v {
			t.Errorf("WithVersion(%+v) = %q / %q / %+v", tt.v, got.Original(), got.String(), got.Version())
		}
	}
	if _, err := r.WithVersion(Version{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty version: %v", err)
	}
	if _, err := r.WithVersion(Version{Tag: "bad\ntag"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad tag: %v", err)
	}
}

func TestVersion(t *testing.T) {
	tests := []struct {
		in   string
		want Version
	}{
		{"1.2", Version{Tag: "1.2"}},
		{"1.2@" + testDigest, Version{Tag: "1.2", Digest: testDigest}},
		{"@" + testDigest, Version{Digest: testDigest}},
		{testDigest, Version{Digest: testDigest}},
		{"", Version{}},
	}
	for _, tt := range tests {
		got := ParseVersion(tt.in)
		if got != tt.want {
			t.Errorf("ParseVersion(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if want := strings.TrimPrefix(tt.in, "@"); got.String() != want {
			t.Errorf("String of %q = %q, want %q", tt.in, got.String(), want)
		}
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		in, name string
		v        Version
	}{
		{"nginx", "nginx", Version{}},
		{"nginx:1.25", "nginx", Version{Tag: "1.25"}},
		{"localhost:5000/app", "localhost:5000/app", Version{}},
		{"localhost:5000/app:v1@" + testDigest, "localhost:5000/app", Version{Tag: "v1", Digest: testDigest}},
		{"app@" + testDigest, "app", Version{Digest: testDigest}},
		{"not a name:x", "not a name", Version{Tag: "x"}},
	}
	for _, tt := range tests {
		name, v := Split(tt.in)
		if name != tt.name || v != tt.v {
			t.Errorf("Split(%q) = %q, %+v; want %q, %+v", tt.in, name, v, tt.name, tt.v)
		}
	}
}

func TestValidTag(t *testing.T) {
	for _, tag := range []string{"v1", "1.2.3", "_x", "A-b_c.d", strings.Repeat("x", 128)} {
		if !ValidTag(tag) {
			t.Errorf("ValidTag(%q) = false", tag)
		}
	}
	for _, tag := range []string{"", ".x", "-x", "a:b", "a/b", "a\nb", "a b", strings.Repeat("x", 129), "é"} {
		if ValidTag(tag) {
			t.Errorf("ValidTag(%q) = true", tag)
		}
	}
}

// The same image is spelt many ways in annotations, manifests, overrides
// and Pod specs; MatchesName is the one rule for all of them.
func TestMatchesName(t *testing.T) {
	tests := []struct {
		ref   string
		opts  []Option
		other string
		want  bool
	}{
		{ref: "nginx", other: "nginx", want: true},
		{ref: "nginx", other: "nginx:1.25", want: true},
		{ref: "nginx", other: "docker.io/library/nginx", want: true},
		{ref: "nginx", other: "index.docker.io/library/nginx:1.0@" + testDigest, want: true},
		{ref: "docker.io/library/nginx", other: "nginx", want: true},
		{ref: "library/nginx", other: "registry-1.docker.io/nginx", want: true},
		{ref: "GHCR.io/org/app", other: "ghcr.io/org/app", want: true},
		{ref: "ghcr.io/org/app", other: "ghcr.io/org/app2", want: false},
		{ref: "ghcr.io/org/app", other: "quay.io/org/app", want: false},
		{ref: "nginx", other: "myorg/nginx", want: false},
		{ref: "localhost:5000/app", other: "localhost:5000/app:v1", want: true},
		{ref: "localhost:5000/app", other: "localhost:5001/app", want: false},
		// Elsewhere than Docker Hub, library/ names another repository.
		{ref: "harbor.example.com/library/app", other: "harbor.example.com/app", want: false},
		{ref: "harbor.example.com/app", other: "harbor.example.com/library/app:1.0", want: false},
		{ref: "harbor.example.com/library/app", other: "harbor.example.com/library/app:1.0", want: true},
		// registries.conf's default registry and namespace apply to both sides.
		{ref: "app", opts: []Option{WithDefaultRegistry("registry.example.com"), WithDefaultNamespace("team")}, other: "registry.example.com/team/app:1", want: true},
		{ref: "app", opts: []Option{WithDefaultRegistry("registry.example.com")}, other: "docker.io/library/app", want: false},
		// A value that does not parse matches only its exact spelling.
		{ref: "nginx", other: "NGINX", want: false},
	}
	for _, tt := range tests {
		r, err := Parse(tt.ref, tt.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.MatchesName(tt.other); got != tt.want {
			t.Errorf("%q MatchesName(%q) = %v, want %v", tt.ref, tt.other, got, tt.want)
		}
	}
}

// FuzzMatchesName: the shortcut on the last path element never changes
// MatchesName's answer from that of parsing the other name.
func FuzzMatchesName(f *testing.F) {
	for _, p := range [][2]string{
		{"nginx", "docker.io/library/nginx:1"}, {"ghcr.io/org/app", "ghcr.io/org/app2"}, {"app", "registry.example.com/team/app"},
		{"localhost:5000/app", "localhost:5000/app:v1"}, {"nginx", "NGINX"}, {"a/b", "b"}, {"host:5000", "library/host"},
	} {
		f.Add(p[0], p[1], false)
		f.Add(p[0], p[1], true)
	}
	f.Fuzz(func(t *testing.T, ref, other string, withDefaults bool) {
		var opts []Option
		if withDefaults {
			opts = []Option{WithDefaultRegistry("registry.example.com/base"), WithDefaultNamespace("team")}
		}
		r, err := Parse(ref, opts...)
		if err != nil {
			return
		}
		name, _ := Split(other)
		o, err := parse(other, r.opts)
		want := name == r.OriginalName() || (err == nil && r.SameName(o))
		if got := r.MatchesName(other); got != want {
			t.Fatalf("%q MatchesName(%q) = %v, parsing says %v", ref, other, got, want)
		}
	})
}
