package registry

import (
	"net/http"

	"github.com/image-updater/argocd-image-updater/registry/cloudhost"
	"github.com/image-updater/argocd-image-updater/settings/credref"
)

// opListTags is the Op of a tag listing's Error, as Tags writes it.
const opListTags = "list tags"

// hint is advice for a failure whose message alone does not lead to the
// fix; "" when there is none.
func (e *Error) hint() string {
	code := e.StatusCode()
	refused := code == http.StatusUnauthorized || code == http.StatusForbidden
	switch {
	case !refused || e.Credentials == "" || !isACRHost(e.Registry) && !isACRHost(e.APIHost):
	case e.Credentials == credref.KindAzure.String():
		// The pod's identity, or none: such a source falls back to
		// anonymous access when the pod has no identity.
		return "Azure Container Registry: the pod's workload identity needs a role that may read the repository, such as AcrPull " +
			"(Container Registry Repository Reader on a registry with ABAC repository permissions); " +
			"a pod without one (no AZURE_FEDERATED_TOKEN_FILE) reads the registry anonymously"
	case e.Op == opListTags:
		// Such a token may pull the image and still be refused its tags.
		return "Azure Container Registry: a token limited by a scope map needs metadata/read on the repository to list its tags, " +
			"and content/read to read images; pull alone (content/read) is not enough"
	}
	return ""
}

func isACRHost(host string) bool {
	_, ok := cloudhost.ACR(host)
	return ok
}
