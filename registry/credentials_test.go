package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestParseCredentialRef(t *testing.T) {
	tests := []struct {
		in   string
		want CredentialRef
	}{
		{"pullsecret:argocd/regcred", CredentialRef{Kind: CredentialPullSecret, Namespace: "argocd", Name: "regcred"}},
		{"  pullsecret:argocd/my.secret-1 ", CredentialRef{Kind: CredentialPullSecret, Namespace: "argocd", Name: "my.secret-1"}},
		{"secret:argocd/creds#token", CredentialRef{Kind: CredentialSecret, Namespace: "argocd", Name: "creds", Field: "token"}},
		{"secret:ns/name#.dotted_Key-1", CredentialRef{Kind: CredentialSecret, Namespace: "ns", Name: "name", Field: ".dotted_Key-1"}},
		{"env:REGISTRY_CREDS", CredentialRef{Kind: CredentialEnv, Var: "REGISTRY_CREDS"}},
		{"ext:/app/scripts/ecr-login.sh", CredentialRef{Kind: CredentialExt, Path: "/app/scripts/ecr-login.sh"}},
		{"ecr", CredentialRef{Kind: CredentialECR}},
		{"ecr:arn:aws:iam::123456789012:role/image-updater", CredentialRef{Kind: CredentialECR, RoleARN: "arn:aws:iam::123456789012:role/image-updater"}},
		{"ecr:arn:aws-cn:iam::123456789012:role/path/to/role+x=y,z.w@v_u-t", CredentialRef{Kind: CredentialECR, RoleARN: "arn:aws-cn:iam::123456789012:role/path/to/role+x=y,z.w@v_u-t"}},
		{"ecr:arn:aws-us-gov:iam::123456789012:role/r", CredentialRef{Kind: CredentialECR, RoleARN: "arn:aws-us-gov:iam::123456789012:role/r"}},
		{"gcp", CredentialRef{Kind: CredentialGCP}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCredentialRef(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			again, err := ParseCredentialRef(got.String())
			if err != nil || again != got {
				t.Errorf("String() %q does not parse back: %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestParseCredentialRefErrors(t *testing.T) {
	tests := []struct{ in, reason string }{
		{"", "empty reference"},
		{"   ", "empty reference"},
		{"pullsecret", "want pullsecret:<namespace>/<name>"},
		{"pullsecret:regcred", "is not <namespace>/<name>"},
		{"pullsecret:/regcred", "is not <namespace>/<name>"},
		{"pullsecret:ns/", "is not <namespace>/<name>"},
		{"pullsecret:Argo/regcred", "not a valid namespace"},
		{"pullsecret:ns/a/b", "not a valid Secret name"},
		{"secret:ns/name", "missing field"},
		{"secret:ns/name#", "missing field"},
		{"secret:ns/name#a b", "not a valid Secret key"},
		{"secret", "want secret:"},
		{"env", "missing variable name"},
		{"env:", "missing variable name"},
		{"env:A=B", "not a valid environment variable name"},
		{"ext", "missing script path"},
		{"ext:scripts/login.sh", "not absolute"},
		{"ecr:", "not an IAM role ARN"},
		{"ecr:arn:aws:iam::12345:role/x", "not an IAM role ARN"},
		{"ecr:arn:aws:iam::123456789012:user/x", "not an IAM role ARN"},
		{"ecr:arn:aws:s3:::bucket", "not an IAM role ARN"},
		{"gcp:project", "takes no argument"},
		{"vault:secret/x", `unknown kind "vault"`},
		{"PULLSECRET:ns/x", "unknown kind"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseCredentialRef(tt.in)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidCredentialRef) {
				t.Errorf("not ErrInvalidCredentialRef: %v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, fmt.Sprintf("%q", tt.in)) || !strings.Contains(msg, tt.reason) {
				t.Errorf("message %q should quote the reference and contain %q", msg, tt.reason)
			}
		})
	}
}

func TestCredentialKindString(t *testing.T) {
	if CredentialPullSecret.String() != "pullsecret" || CredentialGCP.String() != "gcp" || CredentialKind(0).String() != "CredentialKind(0)" {
		t.Error("CredentialKind.String")
	}
	if !CredentialECR.Native() || CredentialExt.Native() {
		t.Error("Native")
	}
	if !(CredentialRef{}).IsZero() || (CredentialRef{}).String() != "" {
		t.Error("zero CredentialRef")
	}
}

func TestCredentialRedaction(t *testing.T) {
	const password = "s3cr3t-Pa55"
	c := Credential{Username: "AWS", Password: password}
	printed := map[string]string{
		"String":   c.String(),
		"GoString": c.GoString(),
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10v"} {
		printed[verb] = fmt.Sprintf(verb, c)
		printed["&"+verb] = fmt.Sprintf(verb, &c)
		printed["slice"+verb] = fmt.Sprintf(verb, []Credential{c})
	}
	var logBuf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&logBuf, nil), slog.NewJSONHandler(&logBuf, nil)} {
		slog.New(h).Info("resolved", "cred", c)
	}
	printed["slog"] = logBuf.String()
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var decoded map[string]string
	if err := json.Unmarshal(js, &decoded); err != nil {
		t.Fatal(err)
	}
	printed["json"] = string(js) + fmt.Sprint(decoded)
	printed["error"] = fmt.Errorf("wrapped: %v", c).Error()

	for how, s := range printed {
		if strings.Contains(s, password) {
			t.Errorf("%s prints the password: %s", how, s)
		}
		if !strings.Contains(s, "AWS") || !strings.Contains(s, "<redacted>") {
			t.Errorf("%s should show the username and <redacted>: %s", how, s)
		}
	}
	if got := fmt.Sprint(Credential{Username: "u"}); strings.Contains(got, "redacted") {
		t.Errorf("an empty password needs no redaction: %s", got)
	}
}
