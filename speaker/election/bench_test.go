package election

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// benchCluster is 100 nodes in 4 zones, every one a live member, 3 advertisements
// (all pools; pool p2 from zones a and b on eth0; web Services everywhere), and n
// Services of pools p1/p2, a fifth of them Local with 3 ready endpoints on random nodes.
func benchCluster(n int, dualStack bool) (View, []Service) {
	return benchClusterOf(100, n, dualStack)
}

// benchNodes is benchCluster with nodes nodes and n single-stack Services.
func benchNodes(nodes, n int) (View, []Service) {
	return benchClusterOf(nodes, n, false)
}

func benchClusterOf(nodes, n int, dualStack bool) (View, []Service) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var v View
	for i := range nodes {
		name := fmt.Sprintf("worker%04d", i)
		v.Nodes = append(v.Nodes, mkNode(name, label("zone", string(rune('a'+i%4)))))
		v.Members = append(v.Members, name)
	}
	v.Advertisements = ads(
		mkAd("l2-p1", []string{"p1"}),
		mkAd("l2-p2", []string{"p2"}, onNodes("zone in (a,b)"), ifaces("eth0")),
		Advertisement{Name: "l2-web", AllPools: true, ServiceSelectors: sels("app=web")},
	)
	svcs := make([]Service, n)
	for i := range svcs {
		s := Service{
			Key:    fmt.Sprintf("ns%d/svc%d", i%50, i),
			IPs:    []netip.Addr{netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})},
			Pool:   []string{"p1", "p2"}[i%2],
			Labels: map[string]string{"app": []string{"web", "db", "api"}[i%3]},
			Local:  i%5 == 0,
		}
		if dualStack {
			s.IPs = append(s.IPs, netip.AddrFrom16([16]byte{0xfc, 0, 14: byte(i >> 8), 15: byte(i)}))
		}
		for range 3 {
			s.Endpoints = append(s.Endpoints, readyOn(v.Nodes[rnd.IntN(nodes)].Name))
		}
		svcs[i] = s
	}
	return v, svcs
}

// BenchmarkElect10kIPs100Nodes elects 10,000 IPs (one Service each) over 100 nodes:
// what a speaker computes after a membership change.
func BenchmarkElect10kIPs100Nodes(b *testing.B) {
	benchElect(b, 10_000, false)
}

// BenchmarkElect5kDualStack100Nodes: 5,000 dual-stack Services, so 10,000 IPs in 5,000
// groups.
func BenchmarkElect5kDualStack100Nodes(b *testing.B) {
	benchElect(b, 5_000, true)
}

// BenchmarkElectOneService100Nodes: the election after one Service or EndpointSlice
// changes, the whole view compiled again.
func BenchmarkElectOneService100Nodes(b *testing.B) {
	benchElect(b, 1, false)
}

func benchElect(b *testing.B, n int, dualStack bool) {
	v, svcs := benchCluster(n, dualStack)
	var ips int
	b.ReportAllocs()
	for b.Loop() {
		ips = len(Elect(v, svcs))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(ips), "ns/ip")
}
