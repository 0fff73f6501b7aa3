package credref

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
		{"azure", Ref{Kind: KindAzure}},
		{"Azure", Ref{Kind: KindAzure}},
		// As upstream reads them: kinds in any case, and a registry prefix
		// before '=' that says nothing more.
		{"PullSecret:argocd/regcred", Ref{Kind: KindPullSecret, Namespace: "argocd", Name: "regcred"}},
		{"ENV:REGISTRY_CREDS", Ref{Kind: KindEnv, Var: "REGISTRY_CREDS"}},
		{"gcr.io=pullsecret:argocd/name", Ref{Kind: KindPullSecret, Namespace: "argocd", Name: "name"}},
		{"ghcr.io = secret:argocd/creds#token", Ref{Kind: KindSecret, Namespace: "argocd", Name: "creds", Field: "token"}},
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
	// shown is how the message names the reference: the kind only, for a
	// reference's argument, or the whole of an unknown kind, may be a
	// secret written in the wrong place.
	tests := []struct{ in, shown, reason string }{
		{"", `""`, "empty reference"},
		{"   ", `""`, "empty reference"},
		{"pullsecret", `"pullsecret:<redacted>"`, "want pullsecret:<namespace>/<name>"},
		{"pullsecret:regcred", `"pullsecret:<redacted>"`, "not <namespace>/<name>"},
		{"pullsecret:/regcred", `"pullsecret:<redacted>"`, "not <namespace>/<name>"},
		{"pullsecret:ns/", `"pullsecret:<redacted>"`, "not <namespace>/<name>"},
		{"pullsecret:Argo/regcred", `"pullsecret:<redacted>"`, "the namespace is not a valid namespace name"},
		{"pullsecret:ns/a/b", `"pullsecret:<redacted>"`, "the name is not a valid Secret name"},
		{"pullsecret:admin:hunter2", `"pullsecret:<redacted>"`, "not <namespace>/<name>"},
		{"secret:ns/name", `"secret:<redacted>"`, "missing field"},
		{"secret:ns/name#", `"secret:<redacted>"`, "missing field"},
		{"secret:ns/name#a b", `"secret:<redacted>"`, "the field is not a valid Secret key"},
		{"secret", `"secret:<redacted>"`, "want secret:"},
		{"env", `"env:<redacted>"`, "missing variable name"},
		{"env:", `"env:<redacted>"`, "missing variable name"},
		{"env:A=B", `"env:<redacted>"`, "not a valid environment variable name"},
		{"env:robot:s3cret", `"env:<redacted>"`, "not a valid environment variable name"},
		{"ext", `"ext:<redacted>"`, "missing script path"},
		{"ext:scripts/login.sh", `"ext:<redacted>"`, "not absolute"},
		{"ecr:", `"ecr:<redacted>"`, "not an IAM role ARN"},
		{"ecr:arn:aws:iam::12345:role/x", `"ecr:<redacted>"`, "not an IAM role ARN"},
		{"ecr:arn:aws:iam::123456789012:user/x", `"ecr:<redacted>"`, "not an IAM role ARN"},
		{"ecr:arn:aws:s3:::bucket", `"ecr:<redacted>"`, "not an IAM role ARN"},
		{"gcp:project", `"gcp:<redacted>"`, "takes no argument"},
		{"azure:", `"azure:<redacted>"`, "takes no argument"},
		{"azure:00000000-0000-0000-0000-000000000000", `"azure:<redacted>"`, "takes no argument"},
		{"acr", `"<redacted>"`, "unknown kind"},
		{"vault:secret/x", `"<redacted>"`, "unknown kind"},
		{"admin:hunter2", `"<redacted>"`, "unknown kind"},
		{"ghp_0123456789abcdefXYZ", `"<redacted>"`, "unknown kind"},
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
			msg := err.Error() + fmt.Sprintf(" %+v %#v", err, err)
			if want := "invalid credential reference " + tt.shown; !strings.Contains(msg, want) || !strings.Contains(msg, tt.reason) {
				t.Errorf("message %q should contain %q and %q", msg, want, tt.reason)
			}
			// Nothing after the kind is repeated: not the whole, not a part.
			_, arg, found := strings.Cut(strings.TrimSpace(tt.in), ":")
			if !found {
				arg = strings.TrimSpace(tt.in)
			}
			hints := credentialForms + roleARNForm
			for _, part := range strings.FieldsFunc(arg, func(r rune) bool { return strings.ContainsRune(":/#= ", r) }) {
				if len(part) > 2 && strings.Contains(msg, part) && !strings.Contains(hints, part) {
					t.Errorf("message %q repeats %q of the reference", msg, part)
				}
			}
		})
	}
}

func TestKindString(t *testing.T) {
	if KindPullSecret.String() != "pullsecret" || KindGCP.String() != "gcp" || Kind(0).String() != "Kind(0)" {
		t.Error("Kind.String")
	}
	if KindAzure.String() != "azure" {
		t.Error("KindAzure.String")
	}
	if !KindECR.Native() || !KindAzure.Native() || KindExt.Native() {
		t.Error("native")
	}
	if !(Ref{}).IsZero() || (Ref{}).String() != "" {
		t.Error("zero Ref")
	}
}
