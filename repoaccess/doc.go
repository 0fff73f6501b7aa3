// Package repoaccess decides how and whether the controller may reach a
// repository. URL is a repository's identity, parsed once and compared
// as it is dialled, for git and Helm repositories, Argo CD's repository
// Secrets and repo-creds, AppProject sourceRepos, TLS certificates and
// the forges' hosts. RedactURL and RedactErrorURLs hide the credentials
// written into URLs, in messages.
package repoaccess
