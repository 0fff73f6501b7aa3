//go:build ignore

// The main package of Argo CD's config management plugin server, which
// hack/testbin.sh builds for the tests as a binary of its own, beside the
// application-controller and repo-server: the repo-server hands a plugin
// source to it over the socket it opens in the plugins folder, as to the
// sidecar of Argo CD's install. testbin.sh puts the Argo CD module's path
// in place of ARGOCD_MODULE and drops the build constraint above.
package main

import (
	"os"

	"k8s.io/klog/v2"

	cmpserver "ARGOCD_MODULE/cmd/argocd-cmp-server/commands"
	"ARGOCD_MODULE/util/log"
)

func init() {
	// As Argo CD's cmd/main.go: klog logs through logrus.
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func main() {
	if err := cmpserver.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
