package registry

import (
	"net"
	"net/http"
	"strings"
)

// opListTags is the Op of a tag listing's Error, as Tags writes it.
const opListTags = "list tags"

// acrHostSuffixes are the registry hosts of Azure Container Registry in
// Azure's public, China and US Government clouds.
var acrHostSuffixes = []string{".azurecr.io", ".azurecr.cn", ".azurecr.us"}

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
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	for _, s := range acrHostSuffixes {
		if strings.HasSuffix(host, s) && len(host) > len(s) {
			return true
		}
	}
	return false
}
