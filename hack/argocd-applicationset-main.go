//go:build ignore

// The main package of Argo CD's ApplicationSet controller, which
// hack/testbin.sh builds for the tests as a binary of its own, beside the
// application-controller and repo-server: it renders the Applications of
// ApplicationSets from their generators and keeps them as rendered.
// testbin.sh puts the Argo CD module's path in place of ARGOCD_MODULE and
// drops the build constraint above.
package main

import (
	"os"

	"k8s.io/klog/v2"

	applicationset "ARGOCD_MODULE/cmd/argocd-applicationset-controller/commands"
	"ARGOCD_MODULE/util/log"
)

func init() {
	// As Argo CD's cmd/main.go: klog logs through logrus.
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func main() {
	if err := applicationset.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
