package settings

import "testing"

// Every service and alias the settings take; an unknown name lists them.
func TestParseForge(t *testing.T) {
	for in, want := range map[string]Forge{
		"github": ForgeGitHub, "gitlab": ForgeGitLab, "gitea": ForgeGitea, "forgejo": ForgeGitea,
		"bitbucket": ForgeBitbucket, "bitbucket-server": ForgeBitbucketServer,
		"bitbucket-datacenter": ForgeBitbucketServer, "bitbucket-data-center": ForgeBitbucketServer,
		"azure-devops": ForgeAzureDevOps,
	} {
		if got, err := ParseForge(in); err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, want)
		}
	}
	const wantErr = `unknown pull request service "GitHub": use one of github, gitlab, gitea, bitbucket, bitbucket-server, azure-devops, forgejo, bitbucket-datacenter`
	if _, err := ParseForge("GitHub"); err == nil || err.Error() != wantErr {
		t.Errorf("got %v, want %s", err, wantErr)
	}
}
