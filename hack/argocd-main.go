//go:build ignore

// The main package of the Argo CD binary hack/testbin.sh builds for the
// tests: Argo CD's application-controller and repo-server, and the
// git-ask-pass helper the repo-server runs as "argocd", picked by the
// executable's name as Argo CD's cmd/main.go picks them. testbin.sh puts
// the Argo CD module's path in place of ARGOCD_MODULE and drops the build
// constraint above.
package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "ARGOCD_MODULE/cmd/argocd-application-controller/commands"
	gitaskpass "ARGOCD_MODULE/cmd/argocd-git-ask-pass/commands"
	reposerver "ARGOCD_MODULE/cmd/argocd-repo-server/commands"
	"ARGOCD_MODULE/util/log"
)

func init() {
	// As Argo CD's cmd/main.go: klog logs through logrus.
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func main() {
	name := filepath.Base(os.Args[0])
	if v := os.Getenv("ARGOCD_BINARY_NAME"); v != "" {
		name = v
	}
	var command *cobra.Command
	switch name {
	case "argocd-application-controller":
		command = appcontroller.NewCommand()
	case "argocd-repo-server":
		command = reposerver.NewCommand()
	default: // the repo-server runs "argocd" with ARGOCD_BINARY_NAME=argocd-git-ask-pass as GIT_ASKPASS
		command = gitaskpass.NewCommand()
	}
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
