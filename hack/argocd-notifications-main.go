//go:build ignore

// The main package of Argo CD's notifications controller, which
// hack/testbin.sh builds for the tests as a binary of its own, beside the
// application-controller and repo-server: it evaluates the triggers of
// argocd-notifications-cm on the Applications and sends what they say to
// the services configured there. testbin.sh puts the Argo CD module's path
// in place of ARGOCD_MODULE and drops the build constraint above.
package main

import (
	"os"

	"k8s.io/klog/v2"

	notification "ARGOCD_MODULE/cmd/argocd-notification/commands"
	"ARGOCD_MODULE/util/log"
)

func init() {
	// As Argo CD's cmd/main.go: klog logs through logrus.
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func main() {
	if err := notification.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
