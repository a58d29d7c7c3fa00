package app

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"herald.dev/herald/controllers"
	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/metricsserve"
)

// ControllerConfig holds the controller's flags; the defaults suit a cluster install.
type ControllerConfig struct {
	Kubeconfig     string
	Namespace      string
	LBClass        string
	Metrics        metricsserve.Config
	ProbeAddr      string
	LeaderElect    bool
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	QPS            float32
	Burst          int
	ServiceWorkers int
	// MemberlistSecret is created with a random key when missing.
	MemberlistSecret string
	// ClusterCIDRs and ServiceCIDRs are reserved: no Service gets an address from them.
	ClusterCIDRs, ServiceCIDRs []string
	Verbosity                  int
}

// DefaultControllerConfig returns the documented defaults.
func DefaultControllerConfig() ControllerConfig {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "herald-system"
	}
	return ControllerConfig{
		Namespace:        ns,
		Metrics:          metricsserve.Defaults(":7472"),
		ProbeAddr:        ":7473",
		LeaderElect:      true,
		LeaseDuration:    15 * time.Second,
		RenewDeadline:    10 * time.Second,
		RetryPeriod:      2 * time.Second,
		QPS:              100,
		Burst:            200,
		ServiceWorkers:   4,
		MemberlistSecret: memberkey.SecretName,
	}
}

func newControllerCommand() *cobra.Command {
	cfg := DefaultControllerConfig()
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Allocate external IPs to LoadBalancer Services from IPAddressPools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunController(ctrl.SetupSignalHandler(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "kubeconfig file (default: in-cluster config, then $KUBECONFIG)")
	f.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "namespace of herald's IPAddressPools and leader-election lease (default: $POD_NAMESPACE or herald-system)")
	f.StringVar(&cfg.LBClass, "lb-class", cfg.LBClass, "loadBalancerClass served besides Services without a class; Services of other classes are ignored")
	cfg.Metrics.AddFlags(f)
	f.StringVar(&cfg.ProbeAddr, "health-probe-bind-address", cfg.ProbeAddr, "address of /healthz and /readyz")
	f.BoolVar(&cfg.LeaderElect, "leader-elect", cfg.LeaderElect, "elect one active replica through a Lease, so replicas never fight over Services")
	f.DurationVar(&cfg.LeaseDuration, "leader-elect-lease-duration", cfg.LeaseDuration, "how long a lost leader's lease blocks the others")
	f.DurationVar(&cfg.RenewDeadline, "leader-elect-renew-deadline", cfg.RenewDeadline, "how long the leader retries renewing before it gives up")
	f.DurationVar(&cfg.RetryPeriod, "leader-elect-retry-period", cfg.RetryPeriod, "interval between tries to acquire or renew the lease")
	f.Float32Var(&cfg.QPS, "kube-api-qps", cfg.QPS, "requests per second to the API server")
	f.IntVar(&cfg.Burst, "kube-api-burst", cfg.Burst, "burst of requests to the API server")
	f.IntVar(&cfg.ServiceWorkers, "service-workers", cfg.ServiceWorkers, "Services reconciled concurrently")
	f.StringSliceVar(&cfg.ClusterCIDRs, "cluster-cidr", cfg.ClusterCIDRs, "pod CIDRs (comma-separated) that no Service gets an address from, for network plugins that leave Node.spec.podCIDRs empty; the nodes' pod CIDRs and addresses are always reserved")
	f.StringSliceVar(&cfg.ServiceCIDRs, "service-cidr", cfg.ServiceCIDRs, "Service CIDRs (comma-separated) that no Service gets an address from, for Kubernetes before 1.33 (no ServiceCIDR API); the ServiceCIDR objects are always reserved")
	f.StringVar(&cfg.MemberlistSecret, "memberlist-secret", cfg.MemberlistSecret, "Secret holding the speakers' memberlist key, created with a random key when missing (\"\" disables)")
	f.IntVarP(&cfg.Verbosity, "v", "v", cfg.Verbosity, "log verbosity (0 quiet, 1 each allocation, 2+ debug)")
	return cmd
}

// RunController runs the controller until ctx ends.
func RunController(ctx context.Context, cfg ControllerConfig) error {
	ctrl.SetLogger(newLogger(cfg.Verbosity))
	restCfg, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = cfg.QPS, cfg.Burst
	restCfg.UserAgent = "herald-controller"
	ranges, err := clusterRanges(cfg)
	if err != nil {
		return err
	}

	mgr, err := controllers.NewManager(restCfg, controllers.ManagerOptions{
		Options: controllers.Options{
			Namespace: cfg.Namespace, LBClass: cfg.LBClass, ServiceWorkers: cfg.ServiceWorkers,
			MemberlistSecret: cfg.MemberlistSecret, ClusterRanges: ranges,
		},
		Metrics:       cfg.Metrics,
		ProbeAddr:     cfg.ProbeAddr,
		LeaderElect:   cfg.LeaderElect,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
	})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// clusterRanges parses --cluster-cidr and --service-cidr.
func clusterRanges(cfg ControllerConfig) (controllers.ClusterRanges, error) {
	var out controllers.ClusterRanges
	for _, f := range []struct {
		name string
		in   []string
		out  *[]netip.Prefix
	}{{"--cluster-cidr", cfg.ClusterCIDRs, &out.PodCIDRs}, {"--service-cidr", cfg.ServiceCIDRs, &out.ServiceCIDRs}} {
		for _, c := range f.in {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil {
				return out, fmt.Errorf("%s: %q is not a CIDR: %w", f.name, c, err)
			}
			*f.out = append(*f.out, p)
		}
	}
	return out, nil
}

// restConfig loads --kubeconfig, else the in-cluster config, else $KUBECONFIG.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		return ctrlconfig.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// newLogger is the JSON logger of herald's commands at verbosity v (higher, more
// verbose). Its timestamps carry milliseconds: a failover takes a fraction of a second,
// and reading one from the logs of several nodes needs that precision.
func newLogger(v int) logr.Logger {
	return zap.New(zap.UseDevMode(false), zap.Level(zapcore.Level(-v)), func(o *zap.Options) {
		o.TimeEncoder = zapcore.TimeEncoderOfLayout("2006-01-02T15:04:05.000Z07:00")
	})
}
