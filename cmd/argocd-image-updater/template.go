package main

import (
	"fmt"
	"os"

	"github.com/image-updater/argocd-image-updater/writeback/git"
	"github.com/spf13/cobra"
)

func newTemplateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "template FILE",
		Short: "Render a commit-message template with sample data",
		Long: "Render the Go template in FILE (the git.commit-message-template key of the ConfigMap)\n" +
			"with sample data, to check it before the controller uses it.",
		Args: exactlyOneArg("template file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := os.ReadFile(args[0])
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("read template: %w", err)}
			}
			tmpl, err := git.ParseCommitMessageTemplate(string(text))
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("%s: %w", args[0], err)}
			}
			msg, err := tmpl.Render(git.SampleCommitMessageData())
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("%s: %w", args[0], err)}
			}
			fmt.Fprint(cmd.OutOrStdout(), msg)
			return nil
		},
	}
}
