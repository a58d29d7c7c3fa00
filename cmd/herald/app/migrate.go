package app

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"herald.dev/herald/internal/metallbmigrate"
)

// MigrateOptions are the flags of `herald migrate`.
type MigrateOptions struct {
	Kubeconfig      string
	Context         string
	Files           []string
	Namespace       string // herald's, where the converted objects go
	MetalLBNS       string // where MetalLB's objects are read from a cluster
	Apply           bool
	SkipUnsupported bool
	Timeout         time.Duration
}

func newMigrateCommand() *cobra.Command {
	o := MigrateOptions{Namespace: "herald-system", MetalLBNS: "metallb-system", Timeout: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Convert MetalLB's layer-2 configuration into herald's",
		Long: `Read MetalLB's configuration (metallb.io IPAddressPool and L2Advertisement) from a
cluster or from files and print the same herald.dev/v1beta1 objects as YAML, or apply
them with --apply (server-side apply). Names, addresses and selectors stay as they are,
so the Services' MetalLB annotations (which herald reads as aliases of its own) keep
naming the right pools.

herald does layer 2 only. An object it cannot take over as it is — a BGPPeer,
BGPAdvertisement, BFDProfile or Community, or a pool or advertisement with a field
herald lacks — is refused whole, with its name and the field on stderr. Then nothing is
printed or applied and the command fails, unless --skip-unsupported: then the rest is
converted and the command succeeds.

On stderr it also lists the Services that carry MetalLB annotations, and warns of those
asking for a pool herald will not have (they keep their IP, with a Warning Event, until
a pool of that name exists), and of IPs that Services of different namespaces share:
herald shares those only in a pool with spec.allowCrossNamespaceSharing set.

Without -f it reads the cluster of --kubeconfig (MetalLB's objects in
--metallb-namespace, Services in every namespace). With -f it reads only the files,
and Services among them are summarised; the cluster is then needed only for --apply.`,
		Example: `  herald migrate > herald-config.yaml
  herald migrate -f metallb-config.yaml -f more/ --namespace herald-system
  kubectl get ipaddresspools,l2advertisements -n metallb-system -o yaml | herald migrate -f -
  herald migrate --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunMigrate(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster config)")
	f.StringVar(&o.Context, "context", "", "kubeconfig context to use (default: its current context)")
	f.StringArrayVarP(&o.Files, "filename", "f", nil, "read MetalLB's objects from this file, directory or - (stdin) instead of the cluster; repeatable")
	f.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "namespace of herald's objects (the controller's --namespace)")
	f.StringVar(&o.MetalLBNS, "metallb-namespace", o.MetalLBNS, `namespace MetalLB's objects are read from in a cluster ("" for every namespace)`)
	f.BoolVar(&o.Apply, "apply", false, "apply herald's objects to the cluster (server-side apply) instead of printing them")
	f.BoolVar(&o.SkipUnsupported, "skip-unsupported", false, "convert what herald supports and only warn about the rest")
	f.DurationVar(&o.Timeout, "request-timeout", o.Timeout, "give up on the API server after this long (0: never)")
	return cmd
}

// RunMigrate converts MetalLB's configuration and prints or applies herald's to out;
// refusals and the Service summary go to errOut.
func RunMigrate(ctx context.Context, o MigrateOptions, stdin io.Reader, out, errOut io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	var c dynamic.Interface
	var host string
	if len(o.Files) == 0 || o.Apply {
		cfg, err := loadRESTConfig(o.Kubeconfig, o.Context, "herald-migrate", o.Timeout)
		if err != nil {
			return err
		}
		if c, err = dynamic.NewForConfig(cfg); err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
		host = cfg.Host
	}
	in, err := readMigrateInput(ctx, o, c, host, stdin)
	if err != nil {
		return err
	}
	res := metallbmigrate.Convert(in.Objects, o.Namespace)
	for _, r := range res.Refused {
		fmt.Fprintf(errOut, "refused: %s\n", r)
	}
	metallbmigrate.WriteServiceSummary(errOut, metallbmigrate.SummarizeServices(in.Services, res.Pools))
	metallbmigrate.WriteSharedIPs(errOut, metallbmigrate.SharedAcrossNamespaces(in.Services, res.Objects))
	if len(res.Refused) > 0 && !o.SkipUnsupported {
		done := "printed"
		if o.Apply {
			done = "applied"
		}
		return fmt.Errorf("%d MetalLB object(s) cannot be converted (see above), so nothing was %s; pass --skip-unsupported to convert the rest", len(res.Refused), done)
	}
	if len(res.Objects) == 0 {
		fmt.Fprintln(errOut, "No MetalLB IPAddressPool or L2Advertisement found.")
		return nil
	}
	if !o.Apply {
		return metallbmigrate.WriteYAML(out, res.Objects)
	}
	return applyMigrated(ctx, c, host, o.Namespace, res, out)
}

func readMigrateInput(ctx context.Context, o MigrateOptions, c dynamic.Interface, host string, stdin io.Reader) (metallbmigrate.Input, error) {
	if len(o.Files) > 0 {
		return metallbmigrate.ReadFiles(o.Files, stdin)
	}
	in, err := metallbmigrate.ReadCluster(ctx, c, o.MetalLBNS)
	if apierrors.IsNotFound(err) {
		return in, fmt.Errorf("the API server at %s has no metallb.io IPAddressPool resource: is MetalLB (0.13 or later) installed? Or pass its objects with -f: %w", host, err)
	}
	if err != nil {
		return in, fmt.Errorf("reading MetalLB's configuration from %s: %w", host, err)
	}
	return in, nil
}

func applyMigrated(ctx context.Context, c dynamic.Interface, host, namespace string, res metallbmigrate.Result, out io.Writer) error {
	_, err := c.Resource(schemaNamespaces).Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %s does not exist at %s: create it and install herald's CRDs first (kubectl apply --server-side -k config/namespace, then -k config/crd; see docs/migrating-from-metallb.md)", namespace, host)
	}
	if err != nil {
		return fmt.Errorf("checking namespace %s at %s: %w", namespace, host, err)
	}
	if err := metallbmigrate.Apply(ctx, c, res.Objects, out); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w (are herald's CRDs installed at %s?)", err, host)
		}
		return err
	}
	return nil
}

// schemaNamespaces is the resource of Namespaces, for the dynamic client.
var schemaNamespaces = corev1.SchemeGroupVersion.WithResource("namespaces")
