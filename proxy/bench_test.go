package proxy

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"herald.dev/herald/proxy/runner"
)

// benchObjects are n LoadBalancer Services (ClusterIP, NodePort, one VIP) with one
// EndpointSlice of ten endpoints each, two of them on this node, all with
// resourceVersions as an informer cache would hold them.
func benchObjects(n int) ([]*corev1.Service, []*discoveryv1.EndpointSlice) {
	svcs := make([]*corev1.Service, n)
	slices := make([]*discoveryv1.EndpointSlice, n)
	for i := range n {
		hi, lo := i>>8, i&255
		name := fmt.Sprintf("svc%d", i)
		svcs[i] = lbService(name, fmt.Sprintf("10.96.%d.%d", hi, lo), fmt.Sprintf("198.18.%d.%d", hi, lo), int32(30000+i%2768))
		svcs[i].Namespace, svcs[i].ResourceVersion = fmt.Sprintf("ns%d", i%100), "1"
		var eps []string
		for e := range 10 {
			node := "other"
			if e < 2 {
				node = nodeName
			}
			eps = append(eps, fmt.Sprintf("10.%d.%d.%d@%s", 100+e, hi, lo, node))
		}
		slices[i] = slice(name, 8080, corev1.ProtocolTCP, eps...)
		slices[i].Namespace, slices[i].ResourceVersion = svcs[i].Namespace, "1"
	}
	return svcs, slices
}

// benchProxier is a Proxier in a namespace of its own, synced once with n Services.
func benchProxier(b *testing.B, backend runner.Backend, n int) (*Proxier, []*corev1.Service, []*discoveryv1.EndpointSlice) {
	b.Helper()
	lab := newLab(b, "hpxb-")
	node := addNode(b, lab)
	// No Run: the benchmark calls syncAll itself, the way Run would.
	p := newProxier(b, node, func(c *Config) { c.Backend = backend }).p
	svcs, slices := benchObjects(n)
	p.Update(svcs, slices)
	if err := p.syncAll(context.Background()); err != nil {
		b.Fatal(err)
	}
	return p, svcs, slices
}

// benchCases: iptables-nft (Debian 12's 1.8.9) takes about 6 s to restore the
// 47,000 lines of 1,000 Services and did not finish the 470,000 of 10,000 in a quarter
// of an hour (its restore is superlinear in the chains it declares), so 10,000 runs on
// the legacy backend only.
var benchCases = []struct {
	backend  runner.Backend
	services int
}{
	{runner.BackendNFT, 1000},
	{runner.BackendLegacy, 1000},
	{runner.BackendLegacy, 10000},
}

func backendName(b runner.Backend) string {
	if b == runner.BackendDefault {
		return "default"
	}
	return string(b)
}

// BenchmarkSyncFull is one full sync of n Services × 10 endpoints against the real
// iptables-restore in a namespace: jump rules, iptables-save -t nat, generation and
// the restore of the whole payload over the rules of the previous sync.
func BenchmarkSyncFull(b *testing.B) {
	for _, c := range benchCases {
		b.Run(fmt.Sprintf("backend=%s/services=%d", backendName(c.backend), c.services), func(b *testing.B) {
			p, _, _ := benchProxier(b, c.backend, c.services)
			for b.Loop() {
				p.families[0].needFull = true
				if err := p.syncAll(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSyncOneEndpointChanged is the cost of one endpoint change among n Services:
// the tracker converts the one changed EndpointSlice, ChangedServices finds the one
// Service, and a partial sync writes its chains plus the shared ones.
func BenchmarkSyncOneEndpointChanged(b *testing.B) {
	for _, c := range benchCases {
		b.Run(fmt.Sprintf("backend=%s/services=%d", backendName(c.backend), c.services), func(b *testing.B) {
			n := c.services
			p, svcs, slices := benchProxier(b, c.backend, n)
			i := 0
			for b.Loop() {
				i++
				changed := slices[n/2].DeepCopy()
				changed.ResourceVersion = fmt.Sprint(i + 1)
				changed.Endpoints[9].Addresses = []string{fmt.Sprintf("10.200.%d.%d", i>>8&255, i&255)}
				changed.Endpoints[9].Conditions.Ready = ptr.To(true)
				slices[n/2] = changed
				p.Update(svcs, slices)
				if err := p.syncAll(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
