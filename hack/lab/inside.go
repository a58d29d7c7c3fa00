package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"
)

// kubectl and exec pass every argument on, flags included, so they cannot take the
// lab's own flags: they find the run directory through $LAB_RUN_DIR or the default.

func kubectlCmd(o *opts) *cobra.Command {
	return &cobra.Command{
		Use:                "kubectl ARGS...",
		Short:              "Run kubectl against the lab's API server (inside the control plane's namespace)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.state(cmd.Context())
			if err != nil {
				return err
			}
			c, err := s.KubectlCommand(cmd.Context(), args...)
			if err != nil {
				return err
			}
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
			return c.Run()
		},
	}
}

func execCmd(o *opts) *cobra.Command {
	return &cobra.Command{
		Use:                "exec HOST|POD CMD...",
		Short:              "Run a command in a lab namespace: cp, worker..., client, or a pod's (webpod1, ns/name)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return errors.New("usage: lab exec HOST|POD CMD...")
			}
			s, err := o.state(cmd.Context())
			if err != nil {
				return err
			}
			c, err := s.ExecCommand(cmd.Context(), args[0], os.Stdin, os.Stdout, os.Stderr, args[1:]...)
			if err != nil {
				return err
			}
			return c.Run()
		},
	}
}
