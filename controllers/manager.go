package controllers

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/metricsserve"
	"herald.dev/herald/internal/scheme"
)

// ManagerOptions configure the controller process: reconcilers, endpoints and leader
// election. The binary and the tests build the manager the same way.
type ManagerOptions struct {
	Options
	Metrics       metricsserve.Config // BindAddress "0" disables the endpoint
	ProbeAddr     string              // "" or "0" disables it
	LeaderElect   bool
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// SeveralInProcess allows more than one manager in a process (tests run replicas
	// side by side); controller names are otherwise checked for uniqueness.
	SeveralInProcess bool
}

// Leader election (controller-runtime's) creates the Lease, then reads and renews it by
// name (LeaderElectionID), and reports the new leader as a core/v1 Event on it.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create,namespace=herald-system
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;update,namespace=herald-system,resourceNames=herald-controller
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=herald-system

// The HTTPS metrics endpoint (--metrics-secure, internal/metricsserve) asks the API
// server who a scraper is and whether it may get /metrics:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// NewManager returns a manager running herald's reconcilers. Only one replica at a
// time reconciles when LeaderElect is set, so two controllers never fight over a
// Service's IP.
func NewManager(cfg *rest.Config, o ManagerOptions) (ctrl.Manager, error) {
	metrics, err := o.Metrics.Options()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme.New(),
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              "herald-controller",
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaseDuration,
		RenewDeadline:                 &o.RenewDeadline,
		RetryPeriod:                   &o.RetryPeriod,
		Controller:                    config.Controller{SkipNameValidation: &o.SeveralInProcess},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// herald's objects count only in its own namespace.
			&heraldv1.IPAddressPool{}:   {Namespaces: map[string]cache.Config{o.Namespace: {}}},
			&heraldv1.L2Advertisement{}: {Namespaces: map[string]cache.Config{o.Namespace: {}}},
			// The only Leases it reads are the speakers' heartbeats (HeartbeatSummarizer).
			&coordinationv1.Lease{}: HeartbeatLeases(o.Namespace),
			// Of a Node it reads only its addresses and pod CIDRs (ReservedReconciler).
			&corev1.Node{}: {Transform: nodeRanges},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := Setup(mgr, o.Options); err != nil {
		return nil, fmt.Errorf("setting up reconcilers: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}
