package registry

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// ECRRoleSessionName is the session name used when assuming the role of an
// ecr:<role ARN> reference; it shows up in the target account's CloudTrail.
const ECRRoleSessionName = "argocd-image-updater"

// ecrTokenLifetime is what ECR documents for an authorization token; it is
// only used when an answer lacks expiresAt.
const ecrTokenLifetime = 12 * time.Hour

// ecrHostRE matches private ECR registry hosts: the classic and FIPS names in
// the aws and aws-cn partitions, and the dual-stack names under on.aws.
var ecrHostRE = regexp.MustCompile(`^([0-9]{12})\.(?:dkr\.ecr(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-[0-9]+)\.amazonaws\.com(?:\.cn)?|dkr-ecr(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-[0-9]+)\.on\.aws)$`)

// ParseECRHost reads the registry (AWS account) ID and region from a private
// ECR registry host such as 123456789012.dkr.ecr.eu-west-1.amazonaws.com.
// A port, if any, is ignored. ok is false for any other host.
func ParseECRHost(host string) (accountID, region string, ok bool) {
	h := strings.ToLower(nativeHostName(host))
	m := ecrHostRE.FindStringSubmatch(h)
	if m == nil {
		return "", "", false
	}
	region = m[2]
	if region == "" {
		region = m[3]
	}
	return m[1], region, true
}

// nativeHostName drops a ":port" suffix; registry hosts are names, so a
// bracketed IPv6 literal needs no special care beyond what SplitHostPort does.
func nativeHostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// AWSConfigLoader loads the AWS configuration; config.LoadDefaultConfig is
// the default. The provider passes the region of the registry and, if one
// was given, its HTTP client as options.
type AWSConfigLoader func(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error)

// ECROption configures an ECRProvider.
type ECROption func(*ECRProvider)

// WithAWSConfigLoader replaces config.LoadDefaultConfig, for example to add
// load options. A nil loader keeps the default.
func WithAWSConfigLoader(load AWSConfigLoader) ECROption {
	return func(p *ECRProvider) {
		if load != nil {
			p.load = load
		}
	}
}

// WithECRHTTPClient sets the HTTP client for every AWS call (STS and ECR),
// including those of the default credential chain. nil keeps the SDK's.
func WithECRHTTPClient(c *http.Client) ECROption {
	return func(p *ECRProvider) {
		if c != nil {
			p.httpClient = c
		}
	}
}

// WithECRClock sets the clock (time.Now by default) used to date a token
// whose answer carries no expiry. A nil function keeps the default.
func WithECRClock(now func() time.Time) ECROption {
	return func(p *ECRProvider) {
		if now != nil {
			p.now = now
		}
	}
}

// ECRProvider is the NativeProvider for CredentialECR references, that is
// native Amazon ECR credentials. In registries.conf (or wherever a
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
// all that is needed. A token lives 12 hours; CredentialResolver.ResolveCached
// fetches a new one when 90% of that has passed.
//
// The provider keeps one ECR client per region and role, so a token refresh
// reuses the loaded configuration and the SDK's cached AWS credentials. It
// is safe for concurrent use.
type ECRProvider struct {
	load       AWSConfigLoader
	httpClient *http.Client
	now        func() time.Time

	mu      sync.Mutex
	clients map[ecrClientKey]*ecr.Client
}

type ecrClientKey struct {
	region  string
	roleARN string
}

var _ NativeProvider = (*ECRProvider)(nil)

// NewECRProvider builds an ECRProvider. Nothing is loaded until the first
// Credential call.
func NewECRProvider(opts ...ECROption) *ECRProvider {
	p := &ECRProvider{
		load:    config.LoadDefaultConfig,
		now:     time.Now,
		clients: map[ecrClientKey]*ecr.Client{},
	}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// Credential returns the user "AWS" and an ECR authorization token for
// registryHost, with the token's expiry. Errors name the host and the role,
// never a token or key.
func (p *ECRProvider) Credential(ctx context.Context, ref CredentialRef, registryHost string) (Credential, time.Time, error) {
	if ref.Kind != CredentialECR {
		return Credential{}, time.Time{}, fmt.Errorf("ecr: cannot serve credentials of kind %s", ref.Kind)
	}
	account, region, ok := ParseECRHost(registryHost)
	if !ok {
		return Credential{}, time.Time{}, fmt.Errorf("ecr: %s is not an Amazon ECR registry host (want <12-digit account>.dkr.ecr.<region>.amazonaws.com)", registryHost)
	}
	what := registryHost
	if ref.RoleARN != "" {
		what += " as role " + ref.RoleARN
	}

	client, err := p.client(ctx, region, ref.RoleARN)
	if err != nil {
		return Credential{}, time.Time{}, fmt.Errorf("ecr: load AWS configuration for %s: %w", what, err)
	}
	out, err := client.GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{
		// The token is valid for every registry the identity may read, but
		// naming the account makes the answer (and CloudTrail) about this one.
		RegistryIds: []string{account}, //nolint:staticcheck // deprecated only in that it does not narrow the token
	})
	if err != nil {
		return Credential{}, time.Time{}, fmt.Errorf("ecr: get authorization token for %s: %w", what, err)
	}
	if out == nil || len(out.AuthorizationData) == 0 || out.AuthorizationData[0].AuthorizationToken == nil {
		return Credential{}, time.Time{}, fmt.Errorf("ecr: get authorization token for %s: the answer holds no token", what)
	}
	data := out.AuthorizationData[0]
	c, err := decodeECRToken(*data.AuthorizationToken)
	if err != nil {
		return Credential{}, time.Time{}, fmt.Errorf("ecr: authorization token for %s: %w", what, err)
	}
	expiry := p.now().Add(ecrTokenLifetime)
	if data.ExpiresAt != nil && !data.ExpiresAt.IsZero() {
		expiry = *data.ExpiresAt
	}
	return c, expiry, nil
}

// decodeECRToken turns base64("AWS:<password>") into a Credential. Its
// errors say nothing about the token's content.
func decodeECRToken(token string) (Credential, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
	if err != nil {
		return Credential{}, fmt.Errorf("%w: the token is not base64", ErrMalformedCredential)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" || pass == "" {
		return Credential{}, fmt.Errorf("%w: the decoded token is not user:password", ErrMalformedCredential)
	}
	return Credential{Username: user, Password: pass}, nil
}

// client returns the cached ECR client for region and role, building it on
// first use. Loading only reads environment and files (credentials are
// fetched lazily by the SDK), so holding the lock meanwhile is cheap.
func (p *ECRProvider) client(ctx context.Context, region, roleARN string) (*ecr.Client, error) {
	key := ecrClientKey{region: region, roleARN: roleARN}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		return c, nil
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(region)}
	if p.httpClient != nil {
		opts = append(opts, config.WithHTTPClient(p.httpClient))
	}
	cfg, err := p.load(ctx, opts...)
	if err != nil {
		return nil, err
	}
	if cfg.Credentials == nil {
		return nil, errors.New("the AWS configuration has no credential provider")
	}
	if roleARN != "" {
		assume := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), roleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = ECRRoleSessionName
		})
		cfg.Credentials = aws.NewCredentialsCache(assume)
	}
	c := ecr.NewFromConfig(cfg)
	p.clients[key] = c
	return c, nil
}
