package webhook

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// aliyunRegion is a region ID such as cn-hangzhou or ap-southeast-1.
var aliyunRegion = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Alibaba Cloud Container Registry: {"push_data": {"digest", "pushed_at",
// "tag"}, "repository": {"name", "namespace", "region", "repo_full_name",
// ...}}. The payload names no host: a Personal Edition instance is
// registry.<region>.aliyuncs.com; an Enterprise Edition instance
// (<instance>-registry.<region>.cr.aliyuncs.com) or a VPC endpoint is
// given by the registry_url query parameter of the webhook's URL.
func parseAliyun(r *http.Request, body []byte) ([]imageref.Reference, error) {
	var p struct {
		PushData struct {
			Tag string `json:"tag"`
		} `json:"push_data"`
		Repository struct {
			Name         string `json:"name"`
			Namespace    string `json:"namespace"`
			Region       string `json:"region"`
			RepoFullName string `json:"repo_full_name"`
		} `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	path, field := p.Repository.RepoFullName, "repository.repo_full_name"
	if path == "" && p.Repository.Namespace != "" && p.Repository.Name != "" {
		path, field = p.Repository.Namespace+"/"+p.Repository.Name, "repository.namespace and repository.name"
	}
	if path == "" {
		return nil, malformed("repository.repo_full_name (or repository.namespace and repository.name) is missing")
	}
	if p.PushData.Tag == "" {
		return nil, nil
	}
	host := r.URL.Query().Get("registry_url")
	switch {
	case host != "":
		if strings.ContainsAny(host, "/?#@") {
			return nil, malformed("the registry_url query parameter %q must be a host name, with a port at most", host)
		}
	case p.Repository.Region == "":
		return nil, malformed("repository.region is missing, and no registry_url query parameter names the registry")
	case !aliyunRegion.MatchString(p.Repository.Region):
		return nil, malformed("repository.region %q is not a region ID", p.Repository.Region)
	default:
		host = "registry." + p.Repository.Region + ".aliyuncs.com"
	}
	// Repository names are lower case; the console's examples are not.
	ref, err := repository(strings.ToLower(host), strings.ToLower(path), p.PushData.Tag, field)
	if err != nil {
		return nil, err
	}
	return []imageref.Reference{ref}, nil
}
