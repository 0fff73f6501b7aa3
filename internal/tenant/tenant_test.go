package tenant

import (
	"strings"
	"testing"
)

func TestMayNameSecret(t *testing.T) {
	tests := []struct {
		secretNamespace, namespace string
		wantErr                    string
	}{
		{"team-a", "team-a", ""},
		{"argocd", "team-a", "git:secret:argocd/creds names a Secret in namespace argocd; an Application's annotations may name only Secrets in the Application's own namespace, team-a"},
		{"", "team-a", "names a Secret in namespace ;"},
		{"team-a", "team-ab", "own namespace, team-ab"},
	}
	for _, tt := range tests {
		err := MayNameSecret("git:secret:"+tt.secretNamespace+"/creds", tt.secretNamespace, tt.namespace)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s in %s: %v", tt.secretNamespace, tt.namespace, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s in %s: %v, want an error with %q", tt.secretNamespace, tt.namespace, err, tt.wantErr)
		}
	}
}
