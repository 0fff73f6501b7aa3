package ecr

// A local stand-in for the AWS services the ECR provider talks to. It speaks
// the wire protocols of the real services closely enough for the real SDK to
// run unchanged against it: AWS STS (query protocol, XML answers) and Amazon
// ECR (JSON 1.1).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// unsetenvForTest removes an environment variable for the duration of the test.
func unsetenvForTest(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // records the old value for restoring
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}

// awsKeys is a set of temporary AWS credentials as STS hands them out.
type awsKeys struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// awsCall is one request the AWS stand-in received.
type awsCall struct {
	Action string // AssumeRoleWithWebIdentity, AssumeRole or GetAuthorizationToken
	Method string
	Host   string
	URI    string
	Header http.Header
	Form   url.Values // STS calls
	Body   []byte
}

// awsStandIn answers STS AssumeRoleWithWebIdentity and AssumeRole and ECR
// GetAuthorizationToken on one local server.
type awsStandIn struct {
	t   *testing.T
	URL string

	mu    sync.Mutex
	calls []awsCall

	WebIdentityKeys awsKeys
	AssumedKeys     awsKeys
	ECRPassword     string
	ECRExpiresAt    time.Time // zero: the answer has no expiresAt
	ECRToken        string    // if set, sent instead of base64("AWS:"+ECRPassword)
	FailSTS         string    // an STS action that answers 403 AccessDenied
	FailECR         bool      // GetAuthorizationToken answers 400
	// Misbehave names an action whose answer never ends ("endless": a
	// token that goes on) or never comes ("stall": nothing is sent until
	// the client gives up).
	Misbehave map[string]string
}

const stsNamespace = "https://sts.amazonaws.com/doc/2011-06-15/"

func newAWSStandIn(t *testing.T) *awsStandIn {
	t.Helper()
	return startAWSStandIn(t, httptest.NewServer)
}

// newAWSStandInTLS is the stand-in over HTTPS, with a certificate of its
// own CA, and that CA's certificate in PEM.
func newAWSStandInTLS(t *testing.T) (*awsStandIn, []byte) {
	t.Helper()
	var srv *httptest.Server
	s := startAWSStandIn(t, func(h http.Handler) *httptest.Server {
		srv = httptest.NewTLSServer(h)
		return srv
	})
	return s, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func startAWSStandIn(t *testing.T, start func(http.Handler) *httptest.Server) *awsStandIn {
	t.Helper()
	s := &awsStandIn{
		t:               t,
		WebIdentityKeys: awsKeys{"ASIAWEBIDENTITY00001", "web-identity-secret-key", "web-identity-session-token"},
		AssumedKeys:     awsKeys{"ASIAASSUMEDROLE00002", "assumed-role-secret-key", "assumed-role-session-token"},
		ECRPassword:     "ecr-registry-password-0123456789",
		ECRExpiresAt:    time.Now().Add(12 * time.Hour).Truncate(time.Second),
	}
	srv := start(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Calls returns the requests received so far.
func (s *awsStandIn) Calls() []awsCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]awsCall(nil), s.calls...)
}

// CallsOf returns the received requests of one action.
func (s *awsStandIn) CallsOf(action string) []awsCall {
	var out []awsCall
	for _, c := range s.Calls() {
		if c.Action == action {
			out = append(out, c)
		}
	}
	return out
}

func (s *awsStandIn) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	call := awsCall{Method: r.Method, Host: r.Host, URI: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		call.Action = strings.TrimPrefix(target, "AmazonEC2ContainerRegistry_V20150921.")
	} else {
		call.Form, err = url.ParseQuery(string(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		call.Action = call.Form.Get("Action")
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()

	switch s.Misbehave[call.Action] {
	case "stall":
		<-r.Context().Done()
		return
	case "endless":
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = io.WriteString(w, `{"authorizationData":[{"authorizationToken":"`)
		chunk := bytes.Repeat([]byte("A"), 64<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		return
	}
	switch {
	case r.Method != http.MethodPost:
		s.t.Errorf("AWS stand-in: unexpected %s %s", r.Method, r.URL)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case call.Action == "GetAuthorizationToken":
		s.serveECR(w)
	case call.Action == "AssumeRoleWithWebIdentity" || call.Action == "AssumeRole":
		s.serveSTS(w, call)
	default:
		s.t.Errorf("AWS stand-in: unexpected action %q (target %q)", call.Action, r.Header.Get("X-Amz-Target"))
		http.Error(w, "unknown action", http.StatusBadRequest)
	}
}

func (s *awsStandIn) serveSTS(w http.ResponseWriter, call awsCall) {
	if call.Form.Get("Version") != "2011-06-15" {
		s.t.Errorf("STS %s: Version = %q", call.Action, call.Form.Get("Version"))
	}
	w.Header().Set("Content-Type", "text/xml")
	if s.FailSTS == call.Action {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<ErrorResponse xmlns="%s"><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized to perform sts:%s</Message></Error><RequestId>7a62c49f-347e-4fc4-9331-6e8eEXAMPLE</RequestId></ErrorResponse>`, stsNamespace, call.Action)
		return
	}
	keys, extra := s.WebIdentityKeys, `<SubjectFromWebIdentityToken>system:serviceaccount:argocd:argocd-image-updater</SubjectFromWebIdentityToken>`
	if call.Action == "AssumeRole" {
		keys, extra = s.AssumedKeys, ""
	}
	roleARN := call.Form.Get("RoleArn")
	fmt.Fprintf(w, `<%[1]sResponse xmlns="%[2]s">
  <%[1]sResult>
    %[3]s
    <AssumedRoleUser><Arn>%[4]s/%[5]s</Arn><AssumedRoleId>AROAEXAMPLE:%[5]s</AssumedRoleId></AssumedRoleUser>
    <Credentials>
      <AccessKeyId>%[6]s</AccessKeyId>
      <SecretAccessKey>%[7]s</SecretAccessKey>
      <SessionToken>%[8]s</SessionToken>
      <Expiration>%[9]s</Expiration>
    </Credentials>
  </%[1]sResult>
  <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>
</%[1]sResponse>`,
		call.Action, stsNamespace, extra, strings.Replace(roleARN, ":role/", ":assumed-role/", 1), call.Form.Get("RoleSessionName"),
		keys.AccessKeyID, keys.SecretAccessKey, keys.SessionToken, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
}

func (s *awsStandIn) serveECR(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if s.FailECR {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"InvalidParameterException","message":"Invalid parameter at 'registryIds' failed to satisfy constraint"}`)
		return
	}
	token := s.ECRToken
	if token == "" {
		token = base64.StdEncoding.EncodeToString([]byte("AWS:" + s.ECRPassword))
	}
	data := map[string]any{
		"authorizationToken": token,
		"proxyEndpoint":      "https://123456789012.dkr.ecr.example.invalid",
	}
	if !s.ECRExpiresAt.IsZero() {
		data["expiresAt"] = s.ECRExpiresAt.Unix()
	}
	out, _ := json.Marshal(map[string]any{"authorizationData": []map[string]any{data}})
	_, _ = w.Write(out)
}

// verifySigV4 checks that call carries a valid AWS Signature Version 4 made
// with keys for service and region: the request is signed again with the
// same headers and time, and the two Authorization values must agree.
func verifySigV4(t *testing.T, call awsCall, keys awsKeys, service, region string) {
	t.Helper()
	auth := call.Header.Get("Authorization")
	wantScope := "Credential=" + keys.AccessKeyID + "/"
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || !strings.Contains(auth, wantScope) {
		t.Errorf("%s: Authorization = %q, want SigV4 with %s", call.Action, auth, wantScope)
		return
	}
	if got := call.Header.Get("X-Amz-Security-Token"); got != keys.SessionToken {
		t.Errorf("%s: X-Amz-Security-Token = %q, want %q", call.Action, got, keys.SessionToken)
	}
	_, signedList, ok := strings.Cut(auth, "SignedHeaders=")
	if !ok {
		t.Errorf("%s: Authorization has no SignedHeaders: %q", call.Action, auth)
		return
	}
	signedList, _, _ = strings.Cut(signedList, ",")

	req, err := http.NewRequest(call.Method, "http://"+call.Host+call.URI, bytes.NewReader(call.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = call.Host
	for _, h := range strings.Split(signedList, ";") {
		switch h {
		case "host", "content-length", "x-amz-security-token", "x-amz-date":
			continue // set by the signer from the request and the keys
		}
		for _, v := range call.Header.Values(h) {
			req.Header.Add(h, v)
		}
	}
	at, err := time.Parse("20060102T150405Z", call.Header.Get("X-Amz-Date"))
	if err != nil {
		t.Errorf("%s: X-Amz-Date: %v", call.Action, err)
		return
	}
	sum := sha256.Sum256(call.Body)
	creds := aws.Credentials{AccessKeyID: keys.AccessKeyID, SecretAccessKey: keys.SecretAccessKey, SessionToken: keys.SessionToken}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Authorization"); got != auth {
		t.Errorf("%s: signature does not verify with the expected keys:\n got  %s\n want %s", call.Action, auth, got)
	}
}

// setAWSTestEnv points the AWS SDK's default chain at the stand-in as IRSA
// would set it up: a role ARN and a web identity token file, nothing else.
// It returns the token.
func setAWSTestEnv(t *testing.T, s *awsStandIn, roleARN, region string) string {
	t.Helper()
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_DEFAULT_REGION", "AWS_ROLE_SESSION_NAME", "AWS_ENDPOINT_URL", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
		"AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_STS_REGIONAL_ENDPOINTS", "AWS_CA_BUNDLE",
	} {
		unsetenvForTest(t, k)
	}
	dir := t.TempDir()
	token := "eyJhbGciOiJSUzI1NiJ9.test-projected-service-account-token.c2lnbmF0dXJl"
	files := map[string]string{"token": token, "config": "", "credentials": ""}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_REGION", region)
	t.Setenv("AWS_ROLE_ARN", roleARN)
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", filepath.Join(dir, "token"))
	t.Setenv("AWS_ENDPOINT_URL_STS", s.URL)
	t.Setenv("AWS_ENDPOINT_URL_ECR", s.URL)
	return token
}
