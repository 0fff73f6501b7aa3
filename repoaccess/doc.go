// Package repoaccess decides how and whether the controller may reach a
// repository, git or Helm, and with which of Argo CD's credentials.
//
//   - URL is a repository's identity, parsed once and compared as it is
//     dialled, its host in ASCII: for Argo CD's repository Secrets and
//     repo-creds, AppProject sourceRepos, TLS certificates and the
//     forges' hosts.
//   - Resolver finds an Application's credentials among Argo CD's
//     repository Secrets, and the TLS certificates and SSH known hosts of
//     Argo CD's ConfigMaps.
//   - Policy applies the AppProject and the tenant rules before anything
//     is read or sent.
//   - RedactURL and RedactErrorURLs hide the credentials written into
//     URLs, in messages.
package repoaccess
