package credentials

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		in   string
		want Ref
	}{
		{"pullsecret:argocd/regcred", Ref{Kind: KindPullSecret, Namespace: "argocd", Name: "regcred"}},
		{"  pullsecret:argocd/my.secret-1 ", Ref{Kind: KindPullSecret, Namespace: "argocd", Name: "my.secret-1"}},
		{"secret:argocd/creds#token", Ref{Kind: KindSecret, Namespace: "argocd", Name: "creds", Field: "token"}},
		{"secret:ns/name#.dotted_Key-1", Ref{Kind: KindSecret, Namespace: "ns", Name: "name", Field: ".dotted_Key-1"}},
		{"env:REGISTRY_CREDS", Ref{Kind: KindEnv, Var: "REGISTRY_CREDS"}},
		{"ext:/app/scripts/ecr-login.sh", Ref{Kind: KindExt, Path: "/app/scripts/ecr-login.sh"}},
		{"ecr", Ref{Kind: KindECR}},
		{"ecr:arn:aws:iam::123456789012:role/image-updater", Ref{Kind: KindECR, RoleARN: "arn:aws:iam::123456789012:role/image-updater"}},
		{"ecr:arn:aws-cn:iam::123456789012:role/path/to/role+x=y,z.w@v_u-t", Ref{Kind: KindECR, RoleARN: "arn:aws-cn:iam::123456789012:role/path/to/role+x=y,z.w@v_u-t"}},
		{"ecr:arn:aws-us-gov:iam::123456789012:role/r", Ref{Kind: KindECR, RoleARN: "arn:aws-us-gov:iam::123456789012:role/r"}},
		{"gcp", Ref{Kind: KindGCP}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRef(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			again, err := ParseRef(got.String())
			if err != nil || again != got {
				t.Errorf("String() %q does not parse back: %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestParseRefErrors(t *testing.T) {
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
			_, err := ParseRef(tt.in)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidRef) {
				t.Errorf("not ErrInvalidRef: %v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, fmt.Sprintf("%q", tt.in)) || !strings.Contains(msg, tt.reason) {
				t.Errorf("message %q should quote the reference and contain %q", msg, tt.reason)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	if KindPullSecret.String() != "pullsecret" || KindGCP.String() != "gcp" || Kind(0).String() != "Kind(0)" {
		t.Error("Kind.String")
	}
	if !KindECR.native() || KindExt.native() {
		t.Error("native")
	}
	if !(Ref{}).IsZero() || (Ref{}).String() != "" {
		t.Error("zero Ref")
	}
}
