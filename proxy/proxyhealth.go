package proxy

import (
	"time"

	"herald.dev/herald/proxy/model"
	corev1 "k8s.io/api/core/v1"
)

// The proxier's own health, as kube-proxy's /healthz and /livez report it
// (pkg/proxy/healthcheck/proxy_health.go, v1.36): per family, when its rules were last
// brought up to date and since when a change waits for it. A family is healthy unless
// a change has waited HealthTimeout or longer: a proxier with nothing to do is healthy
// however long ago it last synced. The same verdict is the serviceProxyHealthy of the
// health check node ports.

// familyTimes are one family's inputs: lastUpdated is when its last sync succeeded (or
// Run started, so that a proxier whose syncs never succeed still reports a time);
// pendingSince is when the oldest change it has not programmed arrived (zero: none).
type familyTimes struct {
	lastUpdated, pendingSince time.Time
}

// proxyHealth is the JSON body of /healthz and /livez, field for field kube-proxy's.
type proxyHealth struct {
	// LastUpdated is the latest family's lastUpdated; the handlers replace it with the
	// current time when healthy, as kube-proxy does for old clients that read it as
	// "the sync loop is running".
	LastUpdated time.Time `json:"lastUpdated"`
	CurrentTime time.Time `json:"currentTime"`
	// NodeEligible is set by /healthz only.
	NodeEligible *bool                   `json:"nodeEligible,omitempty"`
	Healthy      bool                    `json:"healthy"`
	Status       map[string]familyHealth `json:"status,omitempty"`
}

// familyHealth is one family in proxyHealth.Status, keyed "IPv4" or "IPv6".
type familyHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// assessHealth is the verdict at now. Families that never started (no lastUpdated) are
// left out, as kube-proxy leaves out proxiers whose loop has not started.
func assessHealth(now time.Time, timeout time.Duration, families map[model.Family]familyTimes) proxyHealth {
	h := proxyHealth{CurrentTime: now, Healthy: true, Status: map[string]familyHealth{}}
	for f, t := range families {
		if t.lastUpdated.IsZero() {
			continue
		}
		ok := t.pendingSince.IsZero() || now.Sub(t.pendingSince) < timeout
		h.Status[f.String()] = familyHealth{LastUpdated: t.lastUpdated, Healthy: ok}
		h.Healthy = h.Healthy && ok
		if t.lastUpdated.After(h.LastUpdated) {
			h.LastUpdated = t.lastUpdated
		}
	}
	return h
}

// toBeDeletedTaint is the Cluster Autoscaler's taint on a Node it is about to delete.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// nodeEligible is kube-proxy's rule for /healthz: a node being deleted, or about to be
// by the Cluster Autoscaler, should get no new traffic from load balancers that probe
// /healthz, so it answers 503 while its rules still work. An unknown Node (not read
// yet) is not eligible either.
func nodeEligible(node *corev1.Node) bool {
	if node == nil || node.DeletionTimestamp != nil {
		return false
	}
	for _, t := range node.Spec.Taints {
		if t.Key == toBeDeletedTaint {
			return false
		}
	}
	return true
}
