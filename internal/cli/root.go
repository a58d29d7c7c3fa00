// Package cli builds herald's command line: one binary, a subcommand per component.
package cli

import (
	"fmt"

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
		notImplemented("status", "Print each LoadBalancer IP with its owner node", 6),
		newVersionCommand(),
	)
	return root
}

// notImplemented is a subcommand whose issue is not done yet: it exits non-zero and says so.
func notImplemented(name, short string, issue int) *cobra.Command {
	return &cobra.Command{
		Use:   name,
		Short: short + " (not implemented yet)",
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("herald %s: not implemented yet (tracked in issue %d)", name, issue)
		},
	}
}
