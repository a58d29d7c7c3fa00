// Package app builds herald's command line: one binary, a subcommand per component.
package app

import (
	"github.com/spf13/cobra"
)

// NewRootCommand returns `herald` with all its subcommands.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "herald",
		Short:         "LoadBalancer Services for bare-metal Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(
		newControllerCommand(),
		newSpeakerCommand(),
		newStatusCommand(),
		newRebalanceCommand(),
		newMigrateCommand(),
		newMemberlistKeyCommand(),
		newVersionCommand(),
	)
	return root
}
