package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"herald.dev/herald/internal/lab"
)

func upCmd(o *opts) *cobra.Command {
	cfg := lab.Config{Workers: 3}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Build and start the lab; it keeps running after this command returns",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := o.dir(cmd.Context())
			if err != nil {
				return err
			}
			cfg.RunDir, cfg.Prefix, cfg.Log = dir, o.prefix, os.Stderr
			l, err := lab.Up(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			me := self()
			fmt.Printf(`
The lab is up (state, logs and binaries in %[1]s).
  %[2]s status                      what runs where
  %[2]s kubectl get nodes -o wide   kubectl inside the lab
  %[2]s exec client ip neigh        a command in a lab namespace
  %[2]s link-down worker2           faults: kill-speaker, stop-speaker, start-speaker, freeze-speaker, thaw-speaker, link-up, restart-controller
  %[2]s down                        remove it
`, l.State.RunDir, me)
			return nil
		},
	}
	cmd.Flags().IntVar(&cfg.Workers, "workers", cfg.Workers, "worker nodes (worker, worker2, ...)")
	cmd.Flags().StringVar(&cfg.Assets, "assets", "", "directory with etcd, kube-apiserver, kube-controller-manager and kubectl (default $KUBEBUILDER_ASSETS, else hack/setup-test-binaries.sh builds them)")
	cmd.Flags().BoolVar(&cfg.DualStack, "dual-stack", false, "IPv6 too, as kind's dual-stack network: "+lab.Subnet6.String()+" on the bridge, IPv6 Node, pod and ClusterIP addresses")
	cmd.Flags().StringVar(&cfg.Proxy, "proxy", "iptables", "the speakers' service proxy: iptables or nftables (kube-proxy's two modes)")
	cmd.Flags().StringSliceVar(&cfg.SpeakerArgs, "speaker-arg", nil, "extra flag for every speaker (repeatable)")
	return cmd
}

func downCmd(o *opts) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Remove every namespace, link and process of the lab (also a crashed one); logs stay",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := o.dir(cmd.Context())
			if err != nil {
				return err
			}
			if err := lab.Down(dir, o.prefix); err != nil {
				return err
			}
			fmt.Printf("lab down (logs remain in %s)\n", dir)
			return nil
		},
	}
}

func statusCmd(o *opts) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Print the run directory, the hosts, the processes (alive or not) and the pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := o.dir(cmd.Context())
			if err != nil {
				return err
			}
			return lab.Status(cmd.Context(), os.Stdout, dir, o.prefix)
		},
	}
}

// self is how to run this command again, for the hints it prints: as it was invoked,
// unless that was `go run`, whose binary is gone once it exits.
func self() string {
	if strings.Contains(os.Args[0], "go-build") {
		return "go run ./hack/lab"
	}
	return os.Args[0]
}
