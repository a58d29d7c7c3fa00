package proxy

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxier's herald_proxy_* series.
type metrics struct {
	syncSeconds        *prometheus.HistogramVec
	rules              *prometheus.GaugeVec
	nftTransactions    *prometheus.CounterVec
	syncErrors         prometheus.Counter
	programmingSeconds prometheus.Histogram
	skipped            prometheus.Gauge
	disabled           *prometheus.GaugeVec
	families           *prometheus.GaugeVec
	healthz, livez     *prometheus.CounterVec
	withheld           *prometheus.GaugeVec
}

// Sync durations: kube-proxy's buckets (1 ms × 2^k, 15 buckets, up to ~16 s).
var syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		syncSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "herald_proxy_sync_seconds",
			Help:    "Duration of one iptables sync of one IP family (generate and iptables-restore; a full sync also ensures the jump rules and lists the nat chains).",
			Buckets: syncBuckets,
		}, []string{"mode"}),
		rules: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_proxy_rules",
			Help: "Rules in the proxier's chains after the last successful sync, by IP family and table (iptables mode: filter and nat; nftables mode: herald).",
		}, []string{"family", "table"}),
		nftTransactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_proxy_nftables_transactions_total",
			Help: `nftables mode: sync transactions applied, by IP family and path: "netlink" (partial syncs of chain rewrites, --nftables-netlink), "nft" (the nft binary) or "none" (nothing to change).`,
		}, []string{"family", "path"}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_proxy_sync_errors_total",
			Help: "Syncs that failed (each is followed by a full resync).",
		}),
		programmingSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "herald_proxy_programming_seconds",
			Help: "From an EndpointSlice change (its endpoints.kubernetes.io/last-change-trigger-time, else when the proxier saw it) to the rules for it being applied.",
			// kube-proxy's network_programming_duration_seconds buckets.
			Buckets: merge(prometheus.LinearBuckets(0.25, 0.25, 2), prometheus.LinearBuckets(1, 1, 59),
				prometheus.LinearBuckets(60, 5, 12), prometheus.LinearBuckets(120, 30, 7)),
		}),
		skipped: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_proxy_skipped_objects",
			Help: "Pieces of Services and EndpointSlices (a whole Service, a port, an address, an endpoint) the proxier cannot express and leaves out.",
		}),
		disabled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_proxy_disabled",
			Help: `1 while the proxier is off, with why: "flag" (--proxy=none) or "kube-proxy" (kube-proxy programs this node).`,
		}, []string{"reason"}),
		families: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_proxy_family_programmed",
			Help: "1 for an IP family whose iptables (IPv4) or ip6tables (IPv6) rules the proxier programs, 0 for one it does not (no node IP of the family, its tools or kernel support missing, or the proxier off).",
		}, []string{"family"}),
		healthz: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_proxy_healthz_total",
			Help: "Answers of the proxier's /healthz (--healthz-bind-address), by HTTP status code, as kube-proxy's kubeproxy_proxy_healthz_total.",
		}, []string{"code"}),
		withheld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_proxy_endpoints_withheld",
			Help: "Endpoints of a node this speaker knows dead that the API server still lists as able to serve, and that this node's proxier sends no traffic to. One series per withheld node, 0 once the API server marks them not ready too; none while no node is withheld.",
		}, []string{"node"}),
		livez: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_proxy_livez_total",
			Help: "Answers of the proxier's /livez (--healthz-bind-address), by HTTP status code, as kube-proxy's kubeproxy_proxy_livez_total.",
		}, []string{"code"}),
	}
	// Every reason is exported from the start (at 0), so dashboards and alerts see the
	// series before the proxier ever turns off.
	for _, r := range []string{disabledFlag, disabledKubeProxy} {
		m.disabled.WithLabelValues(r)
	}
	for _, f := range []string{"IPv4", "IPv6"} {
		m.families.WithLabelValues(f)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.syncSeconds, m.rules, m.nftTransactions, m.syncErrors, m.programmingSeconds, m.skipped, m.disabled, m.families, m.healthz, m.livez, m.withheld} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("registering proxier metrics: %w", err)
	}
	return m, nil
}

func merge(lists ...[]float64) []float64 {
	var out []float64
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
