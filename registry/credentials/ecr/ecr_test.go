package ecr

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

const (
	ecrTestHost   = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com"
	ecrTestRegion = "ap-northeast-1"
	irsaRoleARN   = "arn:aws:iam::123456789012:role/argocd-image-updater"
)

// The IRSA case: the SDK's default chain finds AWS_ROLE_ARN and
// AWS_WEB_IDENTITY_TOKEN_FILE, trades the token for keys at STS, and the
// ECR call is signed with those keys.
func TestECRProviderWebIdentity(t *testing.T) {
	s := newAWSStandIn(t)
	token := setAWSTestEnv(t, s, irsaRoleARN, ecrTestRegion)
	p := NewProvider()

	cred, expiry, err := p.Credential(t.Context(), credref.Ref{Kind: credref.KindECR}, credentials.Target{Host: ecrTestHost})
	if err != nil {
		t.Fatalf("Credential: %v", err)
	}
	if want := (credentials.Credential{Username: "AWS", Password: s.ECRPassword}); cred != want {
		t.Errorf("credential = %#v, want user AWS and the stand-in's password", cred)
	}
	if !expiry.Equal(s.ECRExpiresAt) {
		t.Errorf("expiry = %v, want %v", expiry, s.ECRExpiresAt)
	}

	calls := s.Calls()
	if len(calls) != 2 || calls[0].Action != "AssumeRoleWithWebIdentity" || calls[1].Action != "GetAuthorizationToken" {
		t.Fatalf("calls = %v, want AssumeRoleWithWebIdentity then GetAuthorizationToken", awsActions(calls))
	}
	wi := calls[0]
	if got := wi.Form.Get("WebIdentityToken"); got != token {
		t.Errorf("WebIdentityToken = %q, want the token file's content", got)
	}
	if got := wi.Form.Get("RoleArn"); got != irsaRoleARN {
		t.Errorf("RoleArn = %q, want %q", got, irsaRoleARN)
	}
	if got := wi.Header.Get("Authorization"); got != "" {
		t.Errorf("AssumeRoleWithWebIdentity is signed (%q); it authenticates with the token alone", got)
	}

	checkECRCall(t, calls[1], s.WebIdentityKeys, "123456789012")

	// A refresh reuses the client and the SDK's cached keys: no new STS call.
	if _, _, err := p.Credential(t.Context(), credref.Ref{Kind: credref.KindECR}, credentials.Target{Host: ecrTestHost}); err != nil {
		t.Fatalf("second Credential: %v", err)
	}
	if n, m := len(s.CallsOf("AssumeRoleWithWebIdentity")), len(s.CallsOf("GetAuthorizationToken")); n != 1 || m != 2 {
		t.Errorf("after a second call: %d web identity calls, %d token calls; want 1 and 2", n, m)
	}
}

// An answer without expiresAt is taken to last the documented 12 hours,
// counted on the provider's clock.
func TestECRProviderNoExpiry(t *testing.T) {
	s := newAWSStandIn(t)
	setAWSTestEnv(t, s, irsaRoleARN, ecrTestRegion)
	s.ECRExpiresAt = time.Time{}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	p := newProvider(withClock(func() time.Time { return now }))
	_, expiry, err := p.Credential(t.Context(), credref.Ref{Kind: credref.KindECR}, credentials.Target{Host: ecrTestHost})
	if err != nil {
		t.Fatalf("Credential: %v", err)
	}
	if want := now.Add(12 * time.Hour); !expiry.Equal(want) {
		t.Errorf("expiry = %v, want %v", expiry, want)
	}
}

// checkECRCall asserts the GetAuthorizationToken request: protocol headers,
// a SigV4 signature by keys for ecr in the test region, and the registry ID.
func checkECRCall(t *testing.T, call awsCall, keys awsKeys, account string) {
	t.Helper()
	if got := call.Header.Get("X-Amz-Target"); got != "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken" {
		t.Errorf("X-Amz-Target = %q", got)
	}
	if got := call.Header.Get("Content-Type"); got != "application/x-amz-json-1.1" {
		t.Errorf("Content-Type = %q", got)
	}
	if auth := call.Header.Get("Authorization"); !strings.Contains(auth, "/"+ecrTestRegion+"/ecr/aws4_request") {
		t.Errorf("Authorization = %q, want a scope for ecr in %s", auth, ecrTestRegion)
	}
	verifySigV4(t, call, keys, "ecr", ecrTestRegion)
	var body struct {
		RegistryIDs []string `json:"registryIds"`
	}
	if err := json.Unmarshal(call.Body, &body); err != nil {
		t.Fatalf("ECR body %q: %v", call.Body, err)
	}
	if len(body.RegistryIDs) != 1 || body.RegistryIDs[0] != account {
		t.Errorf("registryIds = %q, want [%s]", body.RegistryIDs, account)
	}
}

func awsActions(calls []awsCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Action
	}
	return out
}

// ecr:<role ARN>: the web identity keys are used only to assume the
// cross-account role, whose keys then sign the ECR call.
func TestECRProviderAssumeRole(t *testing.T) {
	const (
		host       = "210987654321.dkr.ecr.ap-northeast-1.amazonaws.com"
		targetRole = "arn:aws:iam::210987654321:role/image-reader"
	)
	s := newAWSStandIn(t)
	setAWSTestEnv(t, s, irsaRoleARN, ecrTestRegion)
	ref, err := credref.ParseRef("ecr:" + targetRole)
	if err != nil {
		t.Fatal(err)
	}

	cred, _, err := NewProvider().Credential(t.Context(), ref, credentials.Target{Host: host})
	if err != nil {
		t.Fatalf("Credential: %v", err)
	}
	if cred.Password != s.ECRPassword {
		t.Errorf("credential = %#v, want the stand-in's password", cred)
	}
	calls := s.Calls()
	if got := awsActions(calls); strings.Join(got, ",") != "AssumeRoleWithWebIdentity,AssumeRole,GetAuthorizationToken" {
		t.Fatalf("calls = %v", got)
	}
	assume := calls[1]
	if got := assume.Form.Get("RoleArn"); got != targetRole {
		t.Errorf("AssumeRole RoleArn = %q, want %q", got, targetRole)
	}
	if got := assume.Form.Get("RoleSessionName"); got != roleSessionName {
		t.Errorf("RoleSessionName = %q, want %q", got, roleSessionName)
	}
	verifySigV4(t, assume, s.WebIdentityKeys, "sts", ecrTestRegion)
	checkECRCall(t, calls[2], s.AssumedKeys, "210987654321")
}

func TestECRProviderErrors(t *testing.T) {
	const targetRole = "arn:aws:iam::210987654321:role/image-reader"
	for _, tc := range []struct {
		name    string
		setup   func(*awsStandIn)
		ref     credref.Ref
		host    string
		want    []string // substrings of the error
		is      error
		actions string // calls the stand-in saw
	}{{
		name:    "web identity refused",
		setup:   func(s *awsStandIn) { s.FailSTS = "AssumeRoleWithWebIdentity" },
		ref:     credref.Ref{Kind: credref.KindECR},
		host:    ecrTestHost,
		want:    []string{"ecr: get authorization token for " + ecrTestHost + ":", "AssumeRoleWithWebIdentity", "AccessDenied", "403"},
		actions: "AssumeRoleWithWebIdentity",
	}, {
		name:    "assume role refused",
		setup:   func(s *awsStandIn) { s.FailSTS = "AssumeRole" },
		ref:     credref.Ref{Kind: credref.KindECR, RoleARN: targetRole},
		host:    ecrTestHost,
		want:    []string{"ecr: get authorization token for " + ecrTestHost + " as role " + targetRole + ":", "AssumeRole", "AccessDenied"},
		actions: "AssumeRoleWithWebIdentity,AssumeRole",
	}, {
		name:    "ECR refuses",
		setup:   func(s *awsStandIn) { s.FailECR = true },
		ref:     credref.Ref{Kind: credref.KindECR},
		host:    ecrTestHost,
		want:    []string{"ecr: get authorization token for " + ecrTestHost + ":", "GetAuthorizationToken", "InvalidParameterException", "400"},
		actions: "AssumeRoleWithWebIdentity,GetAuthorizationToken",
	}, {
		name:    "token not base64",
		setup:   func(s *awsStandIn) { s.ECRToken = "not base64: " + s.ECRPassword },
		ref:     credref.Ref{Kind: credref.KindECR},
		host:    ecrTestHost,
		want:    []string{"ecr: authorization token for " + ecrTestHost + ":", "not base64"},
		is:      credentials.ErrMalformed,
		actions: "AssumeRoleWithWebIdentity,GetAuthorizationToken",
	}, {
		name:    "not an ECR host",
		ref:     credref.Ref{Kind: credref.KindECR},
		host:    "registry.example.com",
		want:    []string{"ecr: registry.example.com is not an Amazon ECR registry host"},
		actions: "",
	}, {
		name:    "wrong kind",
		ref:     credref.Ref{Kind: credref.KindGCP},
		host:    ecrTestHost,
		want:    []string{"ecr: cannot serve credentials of kind gcp"},
		actions: "",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newAWSStandIn(t)
			token := setAWSTestEnv(t, s, irsaRoleARN, ecrTestRegion)
			if tc.setup != nil {
				tc.setup(s)
			}
			_, _, err := NewProvider().Credential(t.Context(), tc.ref, credentials.Target{Host: tc.host})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			t.Log(msg)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			for _, secret := range []string{token, s.ECRPassword, s.WebIdentityKeys.SecretAccessKey, s.WebIdentityKeys.SessionToken, s.AssumedKeys.SecretAccessKey, s.AssumedKeys.SessionToken} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q contains secret material %q", msg, secret)
				}
			}
			if got := strings.Join(awsActions(s.Calls()), ","); got != tc.actions {
				t.Errorf("calls = %q, want %q", got, tc.actions)
			}
		})
	}
}

// Through the resolver: a token is reused until 90% of its life has
// passed, then fetched anew, with the provider's clients kept. The
// resolver's clock is the test's.
func TestECRResolveCachedRefresh(t *testing.T) {
	s := newAWSStandIn(t)
	setAWSTestEnv(t, s, irsaRoleARN, ecrTestRegion)

	var mu sync.Mutex
	loads := 0
	load := func(ctx context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
		mu.Lock()
		loads++
		mu.Unlock()
		return config.LoadDefaultConfig(ctx, opts...)
	}
	// The answer carries whole seconds.
	start := time.Now().Truncate(time.Second)
	var clock atomic.Pointer[time.Time]
	clock.Store(&start)
	now := func() time.Time { return *clock.Load() }
	r := credentials.NewResolver(credentials.WithClock(now), credentials.WithNative(credref.KindECR, newProvider(withConfigLoader(load), withClock(now))))
	ref, target := credref.Ref{Kind: credref.KindECR}, credentials.Target{Host: ecrTestHost, Repository: "app"}

	const life = 12 * time.Hour // ECR's
	s.ECRExpiresAt = start.Add(life)
	for i, step := range []struct {
		at    time.Duration // since start
		next  time.Duration // lifetime of the tokens handed out from now on; 0 keeps it
		calls int
	}{
		{0, 0, 1},                  // first use fetches
		{0, 0, 1},                  // cached
		{life / 2, 0, 1},           // half-way: still cached
		{life * 95 / 100, life, 2}, // past 90%: refreshed
		{life * 95 / 100, 0, 2},    // the new token is cached again
	} {
		at := start.Add(step.at)
		clock.Store(&at)
		if step.next != 0 {
			s.ECRExpiresAt = at.Add(step.next)
		}
		c, err := r.ResolveCached(t.Context(), ref, target, 0)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if c.Password != s.ECRPassword {
			t.Fatalf("step %d: wrong credential %v", i, c)
		}
		if got := len(s.CallsOf("GetAuthorizationToken")); got != step.calls {
			t.Errorf("step %d (%v of a %v token life): %d GetAuthorizationToken calls, want %d", i, step.at, life, got, step.calls)
		}
	}
	if loads != 1 {
		t.Errorf("AWS configuration loaded %d times, want once", loads)
	}
	if n := len(s.CallsOf("AssumeRoleWithWebIdentity")); n != 1 {
		t.Errorf("%d web identity calls, want 1 (the SDK keeps the keys until they expire)", n)
	}
}

// TestECRProviderMisbehavingEndpoints: an AWS endpoint that answers
// without end is read no further than the bound, and one that never
// answers is given up on at the caller's deadline, or at the request's
// own for STS, whose answer the SDK's credential cache waits for past
// the caller's deadline; no error quotes what was sent.
func TestECRProviderMisbehavingEndpoints(t *testing.T) {
	tests := []struct {
		name, action, how, want string
	}{
		{"endless ECR answer", "GetAuthorizationToken", "endless", "AWS answer is larger than 1 MiB"},
		{"endless STS answer", "AssumeRoleWithWebIdentity", "endless", "AWS answer is larger than 1 MiB"},
		{"stalled ECR", "GetAuthorizationToken", "stall", "deadline exceeded"},
		{"stalled STS", "AssumeRoleWithWebIdentity", "stall", "deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAWSStandIn(t)
			setAWSTestEnv(t, s, irsaRoleARN, ecrTestRegion)
			s.Misbehave = map[string]string{tt.action: tt.how}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			var err error
			p := NewProvider()
			p.http = p.http.WithTimeout(3 * time.Second)
			start := time.Now()
			grew := allocated(func() {
				_, _, err = p.Credential(ctx, credref.Ref{Kind: credref.KindECR}, credentials.Target{Host: ecrTestHost})
			})
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %s", took)
			}
			if err == nil || !(strings.Contains(err.Error(), tt.want) || tt.want == "deadline exceeded" && timedOut(err)) {
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "AAAA") {
				t.Errorf("the error quotes the answer: %.200s", err)
			}
			// The SDK retries a failed read three times.
			if grew > 64<<20 {
				t.Errorf("allocated %d MiB", grew>>20)
			}
		})
	}
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// timedOut tells whether err is a request given up on at a deadline: the
// caller's, or the client's own (whose message names no deadline when it
// ends the wait for the headers).
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() ||
		strings.Contains(err.Error(), "Client.Timeout exceeded")
}

// TestECRProviderCABundle: STS and ECR behind a CA of the operator's, which
// AWS_CA_BUNDLE names (the SDK's variable for a corporate or private
// endpoint's CA), are trusted through it, and their answers stay bounded.
func TestECRProviderCABundle(t *testing.T) {
	s, ca := newAWSStandInTLS(t)
	setAWSTestEnv(t, s, irsaRoleARN, ecrTestRegion)
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	credential := func(t *testing.T) (credentials.Credential, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		c, _, err := NewProvider().Credential(ctx, credref.Ref{Kind: credref.KindECR}, credentials.Target{Host: ecrTestHost})
		return c, err
	}

	t.Run("without the bundle, the endpoints are not trusted", func(t *testing.T) {
		if _, err := credential(t); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("got %v, want a certificate error", err)
		}
	})
	t.Setenv("AWS_CA_BUNDLE", bundle)
	t.Run("trusted through the bundle, STS and ECR alike", func(t *testing.T) {
		c, err := credential(t)
		if err != nil {
			t.Fatal(err)
		}
		if c.Username != "AWS" || c.Password != s.ECRPassword {
			t.Errorf("credential %q, want AWS and the stand-in's password", c.Username)
		}
		var actions []string
		for _, call := range s.Calls() {
			actions = append(actions, call.Action)
		}
		if !slices.Equal(actions, []string{"AssumeRoleWithWebIdentity", "GetAuthorizationToken"}) {
			t.Errorf("calls %v", actions)
		}
	})
	for _, action := range []string{"AssumeRoleWithWebIdentity", "GetAuthorizationToken"} {
		t.Run("an endless answer is still bounded: "+action, func(t *testing.T) {
			s.mu.Lock()
			s.Misbehave = map[string]string{action: "endless"}
			s.mu.Unlock()
			defer func() { s.mu.Lock(); s.Misbehave = nil; s.mu.Unlock() }()
			if _, err := credential(t); err == nil || !strings.Contains(err.Error(), "AWS answer is larger than 1 MiB") {
				t.Fatalf("got %v, want the bound's error", err)
			}
		})
	}
}
