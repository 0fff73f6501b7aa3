package registry

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/image-updater/argocd-image-updater/imageref"
	"github.com/image-updater/argocd-image-updater/registry/config"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/registry/transport"
	"github.com/image-updater/argocd-image-updater/settings/credref"
	"github.com/image-updater/argocd-image-updater/test/testenv"
)

// These benchmarks put the client, which lists tags and reads manifests
// with go-containerregistry's remote package, next to that package used
// directly for the same work against the same registry: the difference is
// what the client's own layers cost (sessions and the metadata cache, the
// endpoint stack of rate limit, deadline, body limits, retry and metrics),
// which docs/registry-client.md reports. Both sides authenticate with
// bearer tokens (the Docker Hub, GHCR and ECR scheme) and go through the
// same counting transport: requests count as much as time, since
// registries rate-limit.
//
//	KUBEBUILDER_ASSETS="$(hack/testbin.sh)" go test -run '^$' -bench '^BenchmarkCompare' -count 10 ./registry/ > compare.txt
//	benchstat -col /impl compare.txt

// countingTransport counts what reaches the network: requests answered
// by a server, the token requests among them, and requests that got no
// answer (a failed dial or TLS handshake).
type countingTransport struct {
	next                       http.RoundTripper
	answered, tokens, noAnswer atomic.Int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	switch {
	case err != nil:
		t.noAnswer.Add(1)
	case strings.HasSuffix(req.URL.Path, "/token"):
		t.tokens.Add(1)
		t.answered.Add(1)
	default:
		t.answered.Add(1)
	}
	return resp, err
}

// processCPU is the CPU time, user and system, this process has used:
// the client's own work, since the registry runs in a process of its own
// (testenv needs Linux anyway).
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

type requestCounts struct{ answered, tokens, unanswered int64 }

func (t *countingTransport) snapshot() requestCounts {
	return requestCounts{t.answered.Load(), t.tokens.Load(), t.noAnswer.Load()}
}

// loop runs op b.N times and reports the requests per call next to the
// time.
func (t *countingTransport) loop(b *testing.B, op func(context.Context) error) {
	b.Helper()
	ctx := b.Context()
	if err := op(ctx); err != nil { // correctness, and warm connections
		b.Fatal(err)
	}
	before := t.snapshot()
	cpuBefore, cpuOK := processCPU()
	b.ReportAllocs()
	for b.Loop() {
		if err := op(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after := t.snapshot()
	cpuAfter, _ := processCPU()
	n := float64(b.N)
	if cpuOK {
		// Less disturbed than wall time by whatever else the machine runs.
		b.ReportMetric(float64(cpuAfter-cpuBefore)/n, "cpu-ns/op")
	}
	b.ReportMetric(float64(after.answered-before.answered)/n, "req/op")
	b.ReportMetric(float64(after.tokens-before.tokens)/n, "token-req/op")
	b.ReportMetric(float64(after.unanswered-before.unanswered)/n, "unanswered/op")
}

// compareSetup is a token-auth registry with the clients of both sides
// pointed at it through one counting transport.
type compareSetup struct {
	reg      *testenv.Registry
	counter  *countingTransport
	config   func() *config.Config
	resolver *credentials.Resolver
}

func newCompareSetup(b *testing.B) *compareSetup {
	b.Helper()
	reg := testenv.StartRegistry(b, testenv.WithTokenAuth("updater", "bench-password"))
	return &compareSetup{
		reg: reg,
		// One connection pool for both sides, so neither pays for dialling.
		counter:  &countingTransport{next: transport.NewHTTP(false)},
		config:   testConfig(b, reg.Host, regFields(reg, benchLimit, "credentials: env:REG_CREDS")...),
		resolver: envResolver(map[string]string{"REG_CREDS": reg.Username + ":" + reg.Password}),
	}
}

// ours is the client as the controller builds it: credentials from
// registries.conf, rate limit lifted (it would be what is measured), the
// default request timeout and body limits.
func (s *compareSetup) ours(opts ...Option) *Client {
	return NewClient(append([]Option{
		WithConfig(s.config),
		WithCredentialResolver(s.resolver),
		withBaseTransport(s.counter),
	}, opts...)...)
}

// remoteOptions are the library used directly: the same credentials,
// transport and page size, and its own retry layer.
func (s *compareSetup) remoteOptions(extra ...remote.Option) []remote.Option {
	return append([]remote.Option{
		remote.WithAuth(s.reg.Auth()),
		remote.WithTransport(s.counter),
		remote.WithPageSize(tagsPageSize),
	}, extra...)
}

func (s *compareSetup) puller(b *testing.B, extra ...remote.Option) *remote.Puller {
	b.Helper()
	p, err := remote.NewPuller(s.remoteOptions(extra...)...)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func ggcrRef(b *testing.B, s string) name.Reference {
	b.Helper()
	r, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

type compareCase struct {
	name string
	// op builds what one iteration does.
	op func(b *testing.B) func(context.Context) error
}

// compareRuns makes runCompare alternate the order of its cases from one
// run to the next: whichever side ran first after the setup measured
// slower.
var compareRuns atomic.Int64

func runCompare(b *testing.B, s *compareSetup, cases []compareCase) {
	if compareRuns.Add(1)%2 == 0 {
		cases = slices.Clone(cases)
		slices.Reverse(cases)
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) { s.counter.loop(b, tc.op(b)) })
	}
}

// Listing 2,500 tags: three pages of 1,000. "shared" keeps the
// authenticated client or Puller across calls, as the controller does;
// "new" builds one per call, so each call pings and fetches a token.
func BenchmarkCompareTags2500(b *testing.B) {
	s := newCompareSetup(b)
	pushManyTags(b, s.reg, "many", 2500)
	ref := imageRef(b, s.reg.Host+"/many")
	repo := ggcrRef(b, s.reg.Repo("many")+":x").Context()
	check := func(tags []string, err error) error {
		if err == nil && len(tags) != 2500 {
			b.Fatalf("%d tags, want 2500", len(tags))
		}
		return err
	}
	runCompare(b, s, []compareCase{
		{"session=shared/impl=ours", func(b *testing.B) func(context.Context) error {
			c := s.ours()
			return func(ctx context.Context) error { return check(c.Tags(ctx, ref, credref.Ref{})) }
		}},
		{"session=shared/impl=ggcr", func(b *testing.B) func(context.Context) error {
			p := s.puller(b)
			return func(ctx context.Context) error {
				return check(remote.List(repo, remote.Reuse(p), remote.WithContext(ctx)))
			}
		}},
		{"session=new/impl=ours", func(b *testing.B) func(context.Context) error {
			return func(ctx context.Context) error { return check(s.ours().Tags(ctx, ref, credref.Ref{})) }
		}},
		{"session=new/impl=ggcr", func(b *testing.B) func(context.Context) error {
			return func(ctx context.Context) error {
				return check(remote.List(repo, s.remoteOptions(remote.WithContext(ctx))...))
			}
		}},
	})
}

// Learning the digest a tag points to, the request every cycle makes for
// every candidate tag: ours is Metadata with the digest's metadata cached
// (one HEAD and a map lookup), the library's remote.Head.
func BenchmarkCompareHeadTag(b *testing.B) {
	s := newCompareSetup(b)
	want := s.reg.PushIndex(b, "multi", "1.0", []v1.Platform{linuxAMD64, linuxARM64})
	ref := imageRef(b, s.reg.Host+"/multi:1.0")
	tag := ggcrRef(b, s.reg.Repo("multi")+":1.0")
	runCompare(b, s, []compareCase{
		{"session=shared/impl=ours", func(b *testing.B) func(context.Context) error {
			c := s.ours()
			return func(ctx context.Context) error {
				md, err := c.Metadata(ctx, ref, credref.Ref{}, []v1.Platform{linuxARM64})
				if err == nil && md.Digest != want.String() {
					b.Fatalf("digest %s, want %s", md.Digest, want)
				}
				return err
			}
		}},
		{"session=shared/impl=ggcr", func(b *testing.B) func(context.Context) error {
			p := s.puller(b)
			return func(ctx context.Context) error {
				d, err := remote.Head(tag, remote.Reuse(p), remote.WithContext(ctx))
				if err == nil && d.Digest != want {
					b.Fatalf("digest %s, want %s", d.Digest, want)
				}
				return err
			}
		}},
	})
}

// Reading an image's metadata (manifest, for an index also the chosen
// platform's manifest, and the config blob) that is not cached. Ours keeps
// one result (withMetadataCacheSize(1)) and alternates between two
// images, so every call misses; its authenticated session stays, as the
// library's Puller does. The library has no metadata cache to defeat.
func BenchmarkCompareMetadataCold(b *testing.B) {
	s := newCompareSetup(b)
	created := testenv.Created(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC))
	imgDigests := []v1.Hash{
		s.reg.PushImage(b, "img", []string{"a"}, created),
		s.reg.PushImage(b, "img", []string{"b"}, created),
	}
	idxDigests := []v1.Hash{
		s.reg.PushIndex(b, "idx", "a", []v1.Platform{linuxAMD64, linuxARM64}, created),
		s.reg.PushIndex(b, "idx", "b", []v1.Platform{linuxAMD64, linuxARM64}, created),
	}
	for _, tc := range []struct {
		name     string
		repo     string
		ids      []string // what the two references name after the repository
		platform v1.Platform
	}{
		{"ref=image-by-digest", "img", []string{"@" + imgDigests[0].String(), "@" + imgDigests[1].String()}, linuxAMD64},
		{"ref=index-by-digest", "idx", []string{"@" + idxDigests[0].String(), "@" + idxDigests[1].String()}, linuxARM64},
		// By tag, ours asks HEAD first (the request a warm cache makes
		// alone), the library goes straight to GET.
		{"ref=image-by-tag", "img", []string{":a", ":b"}, linuxAMD64},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ours := []imageref.Reference{imageRef(b, s.reg.Repo(tc.repo)+tc.ids[0]), imageRef(b, s.reg.Repo(tc.repo)+tc.ids[1])}
			theirs := []name.Reference{ggcrRef(b, s.reg.Repo(tc.repo)+tc.ids[0]), ggcrRef(b, s.reg.Repo(tc.repo)+tc.ids[1])}
			platforms := []v1.Platform{tc.platform}
			runCompare(b, s, []compareCase{
				{"impl=ours", func(b *testing.B) func(context.Context) error {
					c := s.ours(withMetadataCacheSize(1))
					i := 0
					return func(ctx context.Context) error {
						i++
						md, err := c.Metadata(ctx, ours[i%2], credref.Ref{}, platforms)
						if err == nil && md.Created.IsZero() {
							b.Fatal("no created time")
						}
						return err
					}
				}},
				{"impl=ggcr", func(b *testing.B) func(context.Context) error {
					p := s.puller(b, remote.WithPlatform(tc.platform))
					i := 0
					return func(ctx context.Context) error {
						i++
						desc, err := remote.Get(theirs[i%2], remote.Reuse(p), remote.WithContext(ctx))
						if err != nil {
							return err
						}
						img, err := desc.Image()
						if err != nil {
							return err
						}
						cfg, err := img.ConfigFile()
						if err == nil && cfg.Created.IsZero() {
							b.Fatal("no created time")
						}
						return err
					}
				}},
			})
		})
	}
}
