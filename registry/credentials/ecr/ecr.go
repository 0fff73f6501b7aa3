package ecr

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	awsecr "github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/image-updater/argocd-image-updater/internal/bounded"
	"github.com/image-updater/argocd-image-updater/registry/cloudhost"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// roleSessionName is the session name used when assuming the role of an
// ecr:<role ARN> reference; it shows up in the target account's CloudTrail.
const roleSessionName = "argocd-image-updater"

// maxAnswer bounds each answer the SDK reads from STS, ECR and the
// instance metadata service: theirs are a few KiB; an endpoint that sends
// without end must not grow the heap.
const maxAnswer = 1 << 20

// requestTimeout bounds each request to them, besides the deadline of the
// work that needs the credentials.
const requestTimeout = 30 * time.Second

// tokenLifetime is what ECR documents for an authorization token; it is
// only used when an answer lacks expiresAt.
const tokenLifetime = 12 * time.Hour

// configLoader loads the AWS configuration; config.LoadDefaultConfig by
// default. The provider passes the region of the registry as an option.
type configLoader func(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error)

// option configures a Provider in tests: the AWS configuration loader and
// the clock that dates a token whose answer carries no expiry.
type option func(*Provider)

func withConfigLoader(load configLoader) option { return func(p *Provider) { p.load = load } }

func withClock(now func() time.Time) option { return func(p *Provider) { p.now = now } }

// Provider is the credentials.Source for ecr references, that is native
// Amazon ECR credentials. In registries.conf (or wherever a
// credential reference is accepted):
//
//	credentials: ecr
//	    The pod's own AWS identity, from the SDK's default credential chain:
//	    IRSA web identity (AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE), EKS Pod
//	    Identity, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, shared config files.
//	credentials: ecr:arn:aws:iam::111122223333:role/image-updater-reader
//	    That identity first assumes the given role (session name
//	    argocd-image-updater), for a registry in another account.
//
// The registry's account and region are read from its host name
// (<account>.dkr.ecr.<region>.amazonaws.com), so one entry per registry is
// all that is needed. A token lives 12 hours; the credentials.Resolver's
// ResolveCached fetches a new one when 90% of that has passed.
//
// The provider keeps one ECR client per region and role, so a token refresh
// reuses the loaded configuration and the SDK's cached AWS credentials. It
// is safe for concurrent use.
type Provider struct {
	load configLoader
	now  func() time.Time
	http *awshttp.BuildableClient

	mu      sync.Mutex
	clients map[clientKey]*awsecr.Client
}

type clientKey struct {
	region  string
	roleARN string
}

var _ credentials.Source = (*Provider)(nil)

// NewProvider builds a Provider. Nothing is loaded until the first
// Credential call.
func NewProvider() *Provider { return newProvider() }

func newProvider(opts ...option) *Provider {
	p := &Provider{
		load:    config.LoadDefaultConfig,
		now:     time.Now,
		clients: map[clientKey]*awsecr.Client{},
		// The SDK's own client: it adds AWS_CA_BUNDLE (or a profile's
		// ca_bundle) to the roots only of a client of this type. Answers are
		// bounded by boundAnswers instead, in every client built from the
		// configuration.
		http: awshttp.NewBuildableClient().WithTimeout(requestTimeout),
	}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// Credential returns the user "AWS" and an ECR authorization token for the
// registry t.Host, with the token's expiry. The token serves every
// repository of the registry. Errors name the host and the role, never a
// token or key.
func (p *Provider) Credential(ctx context.Context, ref credref.Ref, t credentials.Target) (credentials.Credential, time.Time, error) {
	registryHost := t.Host
	if ref.Kind != credref.KindECR {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("ecr: cannot serve credentials of kind %s", ref.Kind)
	}
	account, region, ok := cloudhost.ECR(registryHost)
	if !ok {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("ecr: %s is not an Amazon ECR registry host (want <12-digit account>.dkr.ecr.<region>.amazonaws.com)", registryHost)
	}
	what := registryHost
	if ref.RoleARN != "" {
		what += " as role " + ref.RoleARN
	}

	client, err := p.client(ctx, region, ref.RoleARN)
	if err != nil {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("ecr: load AWS configuration for %s: %w", what, err)
	}
	out, err := client.GetAuthorizationToken(ctx, &awsecr.GetAuthorizationTokenInput{
		// The token is valid for every registry the identity may read, but
		// naming the account makes the answer (and CloudTrail) about this one.
		RegistryIds: []string{account}, //nolint:staticcheck // deprecated only in that it does not narrow the token
	})
	if err != nil {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("ecr: get authorization token for %s: %w", what, err)
	}
	if out == nil || len(out.AuthorizationData) == 0 || out.AuthorizationData[0].AuthorizationToken == nil {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("ecr: get authorization token for %s: the answer holds no token", what)
	}
	data := out.AuthorizationData[0]
	c, err := decodeToken(*data.AuthorizationToken)
	if err != nil {
		return credentials.Credential{}, time.Time{}, fmt.Errorf("ecr: authorization token for %s: %w", what, err)
	}
	expiry := p.now().Add(tokenLifetime)
	if data.ExpiresAt != nil && !data.ExpiresAt.IsZero() {
		expiry = *data.ExpiresAt
	}
	return c, expiry, nil
}

// decodeToken turns base64("AWS:<password>") into a Credential. Its errors
// say nothing about the token's content.
func decodeToken(token string) (credentials.Credential, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
	if err != nil {
		return credentials.Credential{}, fmt.Errorf("%w: the token is not base64", credentials.ErrMalformed)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" || pass == "" {
		return credentials.Credential{}, fmt.Errorf("%w: the decoded token is not user:password", credentials.ErrMalformed)
	}
	return credentials.Credential{Username: user, Password: pass}, nil
}

// client returns the cached ECR client for region and role, building it on
// first use. Loading only reads environment and files (credentials are
// fetched lazily by the SDK), so holding the lock meanwhile is cheap.
func (p *Provider) client(ctx context.Context, region, roleARN string) (*awsecr.Client, error) {
	key := clientKey{region: region, roleARN: roleARN}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		return c, nil
	}
	cfg, err := p.load(ctx, config.WithRegion(region), config.WithHTTPClient(p.http),
		config.WithAPIOptions([]func(*middleware.Stack) error{boundAnswers}))
	if err != nil {
		return nil, err
	}
	if cfg.Credentials == nil {
		return nil, errors.New("the AWS configuration has no credential provider")
	}
	if roleARN != "" {
		assume := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), roleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = roleSessionName
		})
		cfg.Credentials = aws.NewCredentialsCache(assume)
	}
	c := awsecr.NewFromConfig(cfg)
	p.clients[key] = c
	return c, nil
}

// boundAnswers reads at most maxAnswer bytes of each answer. The options
// of the configuration reach every client built from it, those the SDK
// builds while loading (STS for web identity, the instance metadata
// service, SSO) as much as ECR's.
func boundAnswers(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("BoundAnswer",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp.Body != nil {
				resp.Body = bounded.Body(resp.Body, maxAnswer, "AWS answer")
			}
			return out, md, err
		}), middleware.After)
}
