package credref

import (
	"strings"
	"testing"
)

// What a tenant's settings may name: Secrets of their own namespace, the
// pod's plain cloud identities anywhere, and the controller's own
// environment, programs and chosen roles only from the controller's
// namespace.
func TestTenantMay(t *testing.T) {
	tests := []struct {
		ref, namespace, controller string
		wantErr                    string
	}{
		{ref: "pullsecret:team/regcred", namespace: "team", controller: "argocd"},
		{ref: "pullsecret:argocd/regcred", namespace: "team", controller: "argocd", wantErr: "names a Secret in namespace argocd"},
		{ref: "secret:other/creds#token", namespace: "team", controller: "argocd", wantErr: "may name only Secrets in the Application's own namespace, team"},
		{ref: "env:REGISTRY_CREDS", namespace: "argocd", controller: "argocd"},
		{ref: "env:REGISTRY_CREDS", namespace: "team", controller: "argocd", wantErr: "env: credentials may only be named by Applications in the controller's namespace (argocd)"},
		{ref: "ext:/app/scripts/login.sh", namespace: "team", controller: "argocd", wantErr: "controller's namespace"},
		{ref: "ext:/app/scripts/login.sh", namespace: "argocd", controller: "", wantErr: "the controller was given none"},
		{ref: "ecr", namespace: "team", controller: "argocd"},
		{ref: "ecr:arn:aws:iam::123456789012:role/reader", namespace: "team", controller: "argocd", wantErr: "controller's namespace"},
		{ref: "ecr:arn:aws:iam::123456789012:role/reader", namespace: "argocd", controller: "argocd"},
		{ref: "gcp", namespace: "team", controller: "argocd"},
		{ref: "azure", namespace: "team", controller: "argocd"},
	}
	for _, tt := range tests {
		t.Run(tt.ref+" from "+tt.namespace, func(t *testing.T) {
			ref, err := ParseRef(tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			err = ref.TenantMay(tt.namespace, tt.controller)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}
