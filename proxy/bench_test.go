package proxy

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/testkit"
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
		svcs[i] = testkit.LBService(fmt.Sprintf("ns%d", i%100), name, testkit.ClusterIP(fmt.Sprintf("10.96.%d.%d", hi, lo)),
			testkit.Ingress(fmt.Sprintf("198.18.%d.%d", hi, lo)), testkit.NodePort(int32(30000+i%2768)))
		svcs[i].ResourceVersion = "1"
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
func benchProxier(b *testing.B, c benchCase) (*Proxier, []*corev1.Service, []*discoveryv1.EndpointSlice) {
	b.Helper()
	n := c.services
	lab := newLab(b, "hpxb-")
	node := addNode(b, lab)
	// No Run: the benchmark calls syncAll itself, the way Run would.
	p := newProxier(b, node, func(cfg *Config) {
		cfg.Mode, cfg.Backend, cfg.NFTNetlink = c.mode, c.backend, !c.nftOnly
	}).p
	b.Cleanup(p.closeNetlink) // Run would, when it returns
	svcs, slices := benchObjects(n)
	p.Update(svcs, slices)
	if err := p.syncAll(context.Background()); err != nil {
		b.Fatal(err)
	}
	return p, svcs, slices
}

// benchCase is one proxier setup and Service count.
type benchCase struct {
	mode     Mode
	backend  runner.Backend // iptables mode only
	services int
	nftOnly  bool // nftables mode with --nftables-netlink=false
}

func (c benchCase) String() string {
	if c.mode == ModeNFTables && c.nftOnly {
		return fmt.Sprintf("mode=nftables-nft-only/services=%d", c.services)
	}
	if c.mode == ModeNFTables {
		return fmt.Sprintf("mode=nftables/services=%d", c.services)
	}
	backend := string(c.backend)
	if c.backend == runner.BackendDefault {
		backend = "default"
	}
	return fmt.Sprintf("mode=iptables-%s/services=%d", backend, c.services)
}

// benchCases: iptables-nft (Debian 12's 1.8.9) takes about 6 s to restore the
// 47,000 lines of 1,000 Services and did not finish the 470,000 of 10,000 in a quarter
// of an hour (its restore is superlinear in the chains it declares), so 10,000 runs on
// the legacy backend and in nftables mode only.
var benchCases = []benchCase{
	{ModeNFTables, runner.BackendDefault, 1000, false},
	{ModeNFTables, runner.BackendDefault, 10000, false},
	{ModeIPTables, runner.BackendNFT, 1000, false},
	{ModeIPTables, runner.BackendLegacy, 1000, false},
	{ModeIPTables, runner.BackendLegacy, 10000, false},
}

// nftOnlyCases are the nftables mode's partial syncs without netlink, every transaction
// through the nft binary, to show what --nftables-netlink saves.
var nftOnlyCases = []benchCase{
	{ModeNFTables, runner.BackendDefault, 1000, true},
	{ModeNFTables, runner.BackendDefault, 10000, true},
}

// BenchmarkSyncFull is one full sync of n Services × 10 endpoints in a namespace: in
// iptables mode jump rules, iptables-save -t nat, generation and the real
// iptables-restore of the whole payload over the rules of the previous sync; in
// nftables mode generation and one nft transaction recreating the table.
func BenchmarkSyncFull(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.String(), func(b *testing.B) {
			p, _, _ := benchProxier(b, c)
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
	for _, c := range append(slices.Clone(benchCases), nftOnlyCases...) {
		b.Run(c.String(), func(b *testing.B) {
			n := c.services
			p, svcs, slices := benchProxier(b, c)
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

// BenchmarkProxierMemory reports the heap held after a full sync of n Services × 10
// endpoints by the proxier together with the API objects as the informer cache would
// hold them (heap-MB), and by those objects alone (objects-MB); the difference is the
// proxier's own. The speaker's other caches (Nodes, pools, its records) are not in it.
// It measures once; the loop is empty.
func BenchmarkProxierMemory(b *testing.B) {
	for _, c := range []benchCase{{ModeNFTables, runner.BackendDefault, 10000, false}, {ModeIPTables, runner.BackendLegacy, 10000, false}} {
		b.Run(c.String(), func(b *testing.B) {
			before := testkit.HeapInUse()
			p, svcs, slices := benchProxier(b, c)
			total := testkit.HeapInUse() - before
			before = testkit.HeapInUse()
			svcs2, slices2 := benchObjects(c.services)
			objects := testkit.HeapInUse() - before
			runtime.KeepAlive(svcs2)
			runtime.KeepAlive(slices2)
			for b.Loop() {
			}
			b.ReportMetric(testkit.MiB(total), "heap-MB")
			b.ReportMetric(testkit.MiB(objects), "objects-MB")
			runtime.KeepAlive(p)
			runtime.KeepAlive(svcs)
			runtime.KeepAlive(slices)
		})
	}
}
