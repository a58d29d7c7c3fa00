package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// RebalanceOptions are the flags of `herald rebalance`.
type RebalanceOptions struct {
	Kubeconfig    string
	Context       string
	Namespace     string
	AllNamespaces bool
	All           bool
	LBClass       string
	Timeout       time.Duration
	Now           func() time.Time
}

func newRebalanceCommand() *cobra.Command {
	o := RebalanceOptions{Namespace: "default", Timeout: 15 * time.Second, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "rebalance [SERVICE...]",
		Short: "Move LoadBalancer IPs back to the nodes the hash places them on",
		Long: `herald keeps an IP with the node announcing it: a node that comes back (a speaker
restarted, a cable plugged back) takes nothing back, because each move breaks the
connections open through the IP. Over time the IPs may therefore gather on the nodes
that stayed up. rebalance asks for the IPs of the named Services (or of every
LoadBalancer Service with --all) to move, once, to the node the hash places them on,
which spreads them again. It sets the annotation herald.dev/rebalance to the current
time; an IP whose owner is already that node does not move.

The move is make-before-break: the new owner forwards the connections open through
the IP to the old owner, which still carries them, for the speakers' --handover-drain.`,
		Example: `  herald rebalance svc1 svc2 -n default
  herald rebalance --all -A`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return RunRebalance(cmd.Context(), o, args, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster config)")
	f.StringVar(&o.Context, "context", "", "kubeconfig context to use (default: its current context)")
	f.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "namespace of the Services")
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "with --all: every namespace")
	f.BoolVar(&o.All, "all", false, "every LoadBalancer Service with an IP (in the namespace, or every one with -A)")
	f.StringVar(&o.LBClass, "lb-class", "", "loadBalancerClass herald serves besides Services without a class (the controller's --lb-class)")
	f.DurationVar(&o.Timeout, "request-timeout", o.Timeout, "give up on the API server after this long (0: never)")
	return cmd
}

// RunRebalance annotates the Services and prints one line per Service to out.
func RunRebalance(ctx context.Context, o RebalanceOptions, names []string, out io.Writer) error {
	switch {
	case o.All && len(names) > 0:
		return fmt.Errorf("name Services or pass --all, not both")
	case !o.All && len(names) == 0:
		return fmt.Errorf("name the Services to rebalance, or pass --all")
	case o.AllNamespaces && !o.All:
		return fmt.Errorf("-A goes with --all")
	}
	ctx, cancel, cfg, c, err := connect(ctx, o.Kubeconfig, o.Context, "herald-rebalance", o.Timeout)
	if err != nil {
		return err
	}
	defer cancel()
	var targets []corev1.Service
	if o.All {
		ns := o.Namespace
		if o.AllNamespaces {
			ns = ""
		}
		var list corev1.ServiceList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return explainAPIError(err, cfg.Host, "Services")
		}
		for _, s := range list.Items {
			if heraldv1.Announceable(&s, o.LBClass) {
				targets = append(targets, s)
			}
		}
	} else {
		for _, n := range names {
			var s corev1.Service
			if err := c.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: n}, &s); err != nil {
				return fmt.Errorf("service %s/%s: %w", o.Namespace, n, err)
			}
			if !heraldv1.Announceable(&s, o.LBClass) {
				return fmt.Errorf("service %s/%s has no LoadBalancer IP that herald announces", o.Namespace, n)
			}
			targets = append(targets, s)
		}
	}
	slices.SortFunc(targets, func(a, b corev1.Service) int {
		if a.Namespace != b.Namespace {
			if a.Namespace < b.Namespace {
				return -1
			}
			return 1
		}
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	token := o.Now().UTC().Format(time.RFC3339Nano)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{heraldv1.AnnotationRebalance: token}}})
	if err != nil {
		return err
	}
	for i := range targets {
		s := &targets[i]
		if err := c.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("service %s/%s: %w", s.Namespace, s.Name, err)
		}
		fmt.Fprintf(out, "service/%s in %s: rebalance requested (%s=%s)\n", s.Name, s.Namespace, heraldv1.AnnotationRebalance, token)
	}
	if len(targets) == 0 {
		fmt.Fprintln(out, "no LoadBalancer Service with an IP found")
	}
	return nil
}
