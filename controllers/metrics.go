package controllers

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"herald.dev/herald/controllers/ipam"
)

var (
	poolAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_pool_addresses",
		Help: "Addresses of an IPAddressPool by family and state (in_use, available, conflict: free but claimed by a device on the network).",
	}, []string{"pool", "family", "state"})
	allocationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_allocations_total",
		Help: "Allocation outcomes: allocated, failed, released (addresses).",
	}, []string{"result"})
)

// serviceIPs exports one herald_service_ip_info series per allocated IP, read from the
// allocator at scrape time so it can never drift from it. Alerts join it with the
// speakers' herald_l2_owner to find IPs that nobody announces.
var serviceIPs = &holdingsCollector{desc: prometheus.NewDesc("herald_service_ip_info",
	"1 for each LoadBalancer IP the controller has allocated to a Service (only the leader exports it).",
	[]string{"ip", "service", "pool"}, nil)}

func init() {
	metrics.Registry.MustRegister(poolAddresses, allocationsTotal, serviceIPs)
	// Known outcomes start at 0, so rate() and increase() see their first event.
	for _, r := range []string{"allocated", "failed", "released"} {
		allocationsTotal.WithLabelValues(r)
	}
}

type holdingsCollector struct {
	desc  *prometheus.Desc
	state atomic.Pointer[Allocations]
}

func (c *holdingsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *holdingsCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.state.Load()
	if a == nil {
		return
	}
	a.mu.Lock()
	var holdings []ipam.Holding
	if a.loaded { // a replica that is not the leader has not loaded anything
		holdings = a.alloc.Holdings()
	}
	a.mu.Unlock()
	for _, h := range holdings {
		for _, ip := range h.IPs {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, ip.String(), h.Key, h.Pool)
		}
	}
}

func setPoolMetrics(pool string, st ipam.PoolStats) {
	poolAddresses.WithLabelValues(pool, "IPv4", "in_use").Set(float64(st.AssignedIPv4))
	poolAddresses.WithLabelValues(pool, "IPv4", "available").Set(float64(st.AvailableIPv4))
	poolAddresses.WithLabelValues(pool, "IPv6", "in_use").Set(float64(st.AssignedIPv6))
	poolAddresses.WithLabelValues(pool, "IPv6", "available").Set(float64(st.AvailableIPv6))
	poolAddresses.WithLabelValues(pool, "IPv4", "conflict").Set(float64(st.ConflictIPv4))
	poolAddresses.WithLabelValues(pool, "IPv6", "conflict").Set(float64(st.ConflictIPv6))
}

func forgetPoolMetrics(pool string) {
	poolAddresses.DeletePartialMatch(prometheus.Labels{"pool": pool})
}
