package settings

import (
	"fmt"
	"strings"
)

// Forge names the hosting service whose pull requests the git write-back
// opens (package forge speaks to them).
type Forge string

const (
	// ForgeGitHub is GitHub's REST API, at api.github.com or a GitHub
	// Enterprise Server's /api/v3.
	ForgeGitHub Forge = "github"
	// ForgeGitLab is GitLab's REST API v4.
	ForgeGitLab Forge = "gitlab"
	// ForgeGitea is the REST API v1 of Gitea and of Forgejo, its fork.
	ForgeGitea Forge = "gitea"
	// ForgeBitbucket is Bitbucket Cloud's REST API 2.0, at api.bitbucket.org.
	ForgeBitbucket Forge = "bitbucket"
	// ForgeBitbucketServer is the REST API 1.0 of Bitbucket Data Center (once
	// Bitbucket Server).
	ForgeBitbucketServer Forge = "bitbucket-server"
	// ForgeAzureDevOps is the Git REST API of Azure DevOps Services
	// (dev.azure.com) and Azure DevOps Server.
	ForgeAzureDevOps Forge = "azure-devops"
)

// Forges lists the services.
var Forges = []Forge{ForgeGitHub, ForgeGitLab, ForgeGitea, ForgeBitbucket, ForgeBitbucketServer, ForgeAzureDevOps}

// forgeAliases are other names of a service: Forgejo speaks Gitea's API, and
// Bitbucket Server is now called Bitbucket Data Center.
var forgeAliases = map[string]Forge{
	"forgejo":               ForgeGitea,
	"bitbucket-datacenter":  ForgeBitbucketServer,
	"bitbucket-data-center": ForgeBitbucketServer,
}

// ParseForge reads a service's name: one of Forges, or "forgejo" (Gitea),
// "bitbucket-datacenter" or "bitbucket-data-center" (Bitbucket Server).
func ParseForge(s string) (Forge, error) {
	k := Forge(s)
	if a, ok := forgeAliases[s]; ok {
		k = a
	}
	for _, known := range Forges {
		if k == known {
			return k, nil
		}
	}
	names := make([]string, 0, len(Forges)+len(forgeAliases))
	for _, known := range Forges {
		names = append(names, string(known))
	}
	names = append(names, "forgejo", "bitbucket-datacenter")
	return "", fmt.Errorf("unknown pull request service %q: use one of %s", s, strings.Join(names, ", "))
}

// Labels tells whether the service's requests take labels: Bitbucket's,
// Cloud and Data Center alike, do not.
func (k Forge) Labels() bool { return k != ForgeBitbucket && k != ForgeBitbucketServer }
