package registry

import (
	"net/http"

	"github.com/image-updater/argocd-image-updater/registry/cloudhost"
)

// opListTags is the Op of a tag listing's Error, as Tags writes it.
const opListTags = "list tags"

// hint is advice for a failure whose message alone does not lead to the
// fix; "" when there is none.
func (e *Error) hint() string {
	code := e.StatusCode()
	if e.Op == opListTags && e.Credentials != "" && (code == http.StatusUnauthorized || code == http.StatusForbidden) &&
		(isACRHost(e.Registry) || isACRHost(e.APIHost)) {
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
