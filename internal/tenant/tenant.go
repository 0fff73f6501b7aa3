// Package tenant holds the rule that keeps a tenant (whoever edits an
// Application's annotations or an ImageUpdater) to the Secrets of its own
// namespace, for every reference it writes: registry pull secrets,
// signature keys, git:secret:. It imports nothing of the cluster, so that
// the registry credentials, the cycle's checks and repository access
// share it.
package tenant

import "fmt"

// MayNameSecret says whether settings written in namespace, a tenant's,
// may name a Secret in secretNamespace: only a Secret of that namespace,
// since what it holds goes to whatever host the same settings name. What
// is the reference as written, for the message.
func MayNameSecret(what, secretNamespace, namespace string) error {
	if secretNamespace == namespace {
		return nil
	}
	return fmt.Errorf("%s names a Secret in namespace %s; an Application's annotations may name only Secrets in the Application's own namespace, %s",
		what, secretNamespace, namespace)
}
