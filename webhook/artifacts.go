package webhook

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/image-updater/argocd-image-updater/imageref"
)

// registryURL is the registry_url query parameter of the webhook's URL:
// the host (with a port, and for Nexus's path-based routing a path) the
// images of a registry whose payload names no host are pulled from. ""
// when the URL has none.
func registryURL(r *http.Request) (string, error) {
	v := r.URL.Query().Get("registry_url")
	if v == "" {
		return "", nil
	}
	if strings.ContainsAny(v, "?#@ \\") || strings.HasPrefix(v, "/") || strings.HasSuffix(v, "/") || strings.Contains(v, "//") {
		return "", malformed("the registry_url query parameter %q must be a host name, with a port and a path at most", v)
	}
	return strings.ToLower(v), nil
}

// JFrog Artifactory, domain docker, event pushed: {"domain": "docker",
// "event_type": "pushed", "data": {"repo_key", "image_name", "tag", ...},
// "jpd_origin": "https://<host>"}. Its images are pulled from the
// platform's host with the repository key first (the repository path
// method), unless registry_url names the host of the subdomain or port
// method, where the key is not in the path.
func parseArtifactory(r *http.Request, body []byte) ([]imageref.Reference, error) {
	var p struct {
		Domain    string `json:"domain"`
		EventType string `json:"event_type"`
		JPDOrigin string `json:"jpd_origin"`
		Data      struct {
			RepoKey   string `json:"repo_key"`
			EventType string `json:"event_type"`
			ImageName string `json:"image_name"`
			Tag       string `json:"tag"`
		} `json:"data"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	event := p.EventType
	if event == "" {
		event = p.Data.EventType
	}
	if p.Domain != "" && p.Domain != "docker" || event != "pushed" || p.Data.Tag == "" {
		return nil, nil
	}
	host, err := registryURL(r)
	if err != nil {
		return nil, err
	}
	path, field := p.Data.ImageName, "data.image_name"
	if host == "" {
		origin, err := url.Parse(p.JPDOrigin)
		switch {
		case p.JPDOrigin == "":
			return nil, malformed("jpd_origin is missing, and no registry_url query parameter names the registry")
		case err != nil || origin.Host == "" || origin.Scheme != "https" && origin.Scheme != "http":
			return nil, malformed("jpd_origin %q is not the platform's URL", p.JPDOrigin)
		case p.Data.RepoKey == "":
			return nil, malformed("data.repo_key is missing")
		}
		host = strings.ToLower(origin.Host)
		path, field = p.Data.RepoKey+"/"+p.Data.ImageName, "data.repo_key and data.image_name"
	}
	if p.Data.ImageName == "" {
		return nil, malformed("data.image_name is missing")
	}
	ref, err := repository(host, strings.ToLower(path), p.Data.Tag, field)
	if err != nil {
		return nil, err
	}
	return []imageref.Reference{ref}, nil
}

// Sonatype Nexus Repository, repository webhooks of a docker repository:
// a component event {"repositoryName", "action": "CREATED" | "UPDATED",
// "component": {"format": "docker", "name", "version"}}, or an asset event
// whose asset is a manifest, {"asset": {"format": "docker", "name":
// "v2/<name>/manifests/<tag>"}}. Nexus names no host: registry_url gives
// the docker connector's host and port, or the host and repository path of
// its path-based routing.
func parseNexus(r *http.Request, body []byte) ([]imageref.Reference, error) {
	var p struct {
		RepositoryName string `json:"repositoryName"`
		Action         string `json:"action"`
		Component      *struct {
			Format  string `json:"format"`
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"component"`
		Asset *struct {
			Format string `json:"format"`
			Name   string `json:"name"`
		} `json:"asset"`
	}
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	if p.Action != "CREATED" && p.Action != "UPDATED" {
		return nil, nil
	}
	var name, tag, field string
	switch {
	case p.Component != nil && p.Component.Format == "docker":
		name, tag, field = p.Component.Name, p.Component.Version, "component.name"
	case p.Asset != nil && p.Asset.Format == "docker":
		rest, ok := strings.CutPrefix(p.Asset.Name, "v2/")
		i := strings.LastIndex(rest, "/manifests/")
		if !ok || i < 0 {
			return nil, nil // a blob, an upload: nothing to check
		}
		name, tag, field = rest[:i], rest[i+len("/manifests/"):], "asset.name"
		if strings.Contains(tag, ":") {
			tag = "" // a digest
		}
	default:
		return nil, nil
	}
	if tag == "" {
		return nil, nil
	}
	host, err := registryURL(r)
	if err != nil {
		return nil, err
	}
	if host == "" {
		return nil, malformed("Nexus names no registry host: give the docker connector's host in the registry_url query parameter of the webhook's URL")
	}
	ref, err := repository(host, name, tag, field)
	if err != nil {
		return nil, err
	}
	return []imageref.Reference{ref}, nil
}
