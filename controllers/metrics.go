package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"herald.dev/herald/controllers/ipam"
)

var (
	poolAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_pool_addresses",
		Help: "Addresses of an IPAddressPool by family and state (in_use, available).",
	}, []string{"pool", "family", "state"})
	allocationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_allocations_total",
		Help: "Allocation outcomes: allocated, failed, released (addresses).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(poolAddresses, allocationsTotal)
}

func setPoolMetrics(pool string, st ipam.PoolStats) {
	poolAddresses.WithLabelValues(pool, "IPv4", "in_use").Set(float64(st.AssignedIPv4))
	poolAddresses.WithLabelValues(pool, "IPv4", "available").Set(float64(st.AvailableIPv4))
	poolAddresses.WithLabelValues(pool, "IPv6", "in_use").Set(float64(st.AssignedIPv6))
	poolAddresses.WithLabelValues(pool, "IPv6", "available").Set(float64(st.AvailableIPv6))
}

func forgetPoolMetrics(pool string) {
	poolAddresses.DeletePartialMatch(prometheus.Labels{"pool": pool})
}
