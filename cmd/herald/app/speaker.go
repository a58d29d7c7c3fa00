package app

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"herald.dev/herald/speaker"
)

func newSpeakerCommand() *cobra.Command {
	cfg := speaker.DefaultConfig()
	var kubeconfig string
	var verbosity int
	var qps float32 = 50
	burst := 100
	cmd := &cobra.Command{
		Use:   "speaker",
		Short: "Announce this node's LoadBalancer IPs at layer 2 (ARP/NDP)",
		Long: `The speaker runs on every node (DaemonSet, hostNetwork). Speakers form an
encrypted memberlist cluster, elect one owner node per LoadBalancer IP, and the owner
answers ARP and NDP for it and sends gratuitous ARP / unsolicited NA on takeover.

Speakers find each other at the InternalIP of every Node, at --ml-bind-port.
The encryption key is read from --ml-secret-key-path, or, when that file does not
exist, from the Secret --ml-secret-name that the controller creates.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := newLogger(verbosity)
			ctrl.SetLogger(log)
			restCfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			restCfg.QPS, restCfg.Burst = qps, burst
			restCfg.UserAgent = "herald-speaker"
			return speaker.Run(ctrl.SetupSignalHandler(), restCfg, cfg, log.WithName("speaker"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, then $KUBECONFIG)")
	f.Float32Var(&qps, "kube-api-qps", qps, "requests per second to the API server")
	f.IntVar(&burst, "kube-api-burst", burst, "burst of requests to the API server")
	f.IntVarP(&verbosity, "v", "v", verbosity, "log verbosity (0 quiet, 1 each join and election detail, 2+ debug)")
	cfg.AddFlags(f)
	return cmd
}
