package main

import (
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"herald.dev/herald/internal/lab/agent"
)

// agentCmd is the kubelet stand-in `lab up` starts in each worker's namespace.
func agentCmd() *cobra.Command {
	var cfg agent.Config
	var nodeIP, podCIDR, nodeIP6, podCIDR6 string
	var secrets []string
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "The lab's kubelet stand-in for one node (started by `lab up`)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.NodeIP, err = netip.ParseAddr(nodeIP); err != nil {
				return err
			}
			if cfg.PodCIDR, err = netip.ParsePrefix(podCIDR); err != nil {
				return err
			}
			if nodeIP6 != "" {
				if cfg.NodeIP6, err = netip.ParseAddr(nodeIP6); err != nil {
					return err
				}
			}
			if podCIDR6 != "" {
				if cfg.PodCIDR6, err = netip.ParsePrefix(podCIDR6); err != nil {
					return err
				}
			}
			for _, s := range secrets {
				v, err := agent.ParseSecretVolume(s)
				if err != nil {
					return err
				}
				cfg.Secrets = append(cfg.Secrets, v)
			}
			return agent.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Node, "node", "", "the Node's name")
	f.StringVar(&nodeIP, "node-ip", "", "the Node's InternalIP")
	f.StringVar(&podCIDR, "pod-cidr", "", "the Node's pod CIDR")
	f.StringVar(&nodeIP6, "node-ip6", "", "the Node's IPv6 InternalIP, on a dual-stack node")
	f.StringVar(&podCIDR6, "pod-cidr6", "", "the Node's IPv6 pod CIDR, on a dual-stack node")
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig of the lab's API server")
	f.StringVar(&cfg.NetnsPrefix, "netns-prefix", "", "the lab's namespace prefix, which pod namespaces share")
	f.StringVar(&cfg.Dir, "dir", "", "directory for the agent's pod records")
	f.StringArrayVar(&secrets, "secret-volume", nil, "NAMESPACE/NAME:DIR: keep the Secret mounted in DIR as a kubelet does (repeatable)")
	f.DurationVar(&cfg.Heartbeat, "heartbeat", 10*time.Second, "how often the Node's status is posted")
	return cmd
}
