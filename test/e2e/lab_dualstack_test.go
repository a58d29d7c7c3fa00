package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
)

// dualStackPrefix names the namespaces of TestLabDualStack's own lab.
const dualStackPrefix = "hd-"

// TestLabDualStack is the walkthrough on kind's dual-stack network: a pool with an IPv4
// and an IPv6 range, and Services asking for IPv6 only, preferring and requiring both
// families. Seen from the client, every IPv6 VIP is answered by one MAC over NDP, a
// dual-stack Service's two VIPs by the same node, and requests over either family reach
// the walkthrough's pods through the speakers' proxier (ip6tables for IPv6). A node
// reaches an IPv6 ClusterIP too, and the client an IPv6 Service's NodePort on every
// node's IPv6 address. An IPv6 Service with externalTrafficPolicy Local is announced
// by its endpoint's node only and keeps the client's IPv6 address.
func TestLabDualStack(t *testing.T) {
	f := ownLab(t, dualStackPrefix, "dualstack", lab.Config{Workers: 3, DualStack: true}, false)
	f.dualStackPool(t)

	services := []struct {
		name     string
		policy   corev1.IPFamilyPolicy
		families []corev1.IPFamily // asked for; nil lets the API server choose
		want     []corev1.IPFamily // of the VIPs, in order
	}{
		{"v6only", corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{corev1.IPv6Protocol}, []corev1.IPFamily{corev1.IPv6Protocol}},
		{"prefer", corev1.IPFamilyPolicyPreferDualStack, nil, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}},
		{"require", corev1.IPFamilyPolicyRequireDualStack, []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
			[]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}},
	}
	created := map[string]*corev1.Service{}
	for _, s := range services {
		created[s.name] = f.createService(t, testkit.LBService("default", s.name, webpods, func(svc *corev1.Service) {
			svc.Spec.IPFamilyPolicy, svc.Spec.IPFamilies = &s.policy, s.families
		}))
	}
	for _, s := range services {
		vips := f.waitIngresses(t, s.name, len(s.want))
		var got []corev1.IPFamily
		for _, v := range vips {
			got = append(got, map[bool]corev1.IPFamily{true: corev1.IPv6Protocol, false: corev1.IPv4Protocol}[v.Is6()])
		}
		if !slices.Equal(got, s.want) {
			t.Fatalf("Service %s (%s %v) got VIPs %v, want families %v", s.name, s.policy, s.families, vips, s.want)
		}
		t.Logf("Service %s (%s): VIPs %v", s.name, s.policy, vips)

		// One owner, the same for both families of a dual-stack Service.
		var owner string
		for _, vip := range vips {
			mac := f.settledOwner(t, vip, s.name)
			if owner != "" && mac != owner {
				t.Errorf("Service %s: %s is answered by %s but its other VIP by %s; want one node for both families",
					s.name, vip, f.describeMACs([]string{mac}), f.describeMACs([]string{owner}))
			}
			owner = mac
		}
		t.Logf("Service %s: owner %s", s.name, f.describeMACs([]string{owner}))

		for _, vip := range vips {
			url := "http://" + netip.AddrPortFrom(vip, 80).String() + "/"
			res := f.expectCurls(t, url, 50, "Service "+s.name)
			for _, pod := range []string{"webpod1", "webpod2"} {
				if res.Counts["Hostname: "+pod] == 0 {
					t.Errorf("Service %s: none of 50 requests to %s reached %s: %v", s.name, url, pod, res.Counts)
				}
			}
		}
	}

	// No one answers for an IPv6 pool address no Service holds.
	free := netip.MustParseAddr("fc00:f853:ccd:e793::fa")
	silent := labtest.WatchNDP(t, f.clientNS, free, 20*time.Millisecond)
	labtest.WaitARP(t, silent, ownerWindow, labWait, "the unused "+free.String(), labtest.Silence(), f.hostOfMAC)
	silent.Close()

	// Through ip6tables: an IPv6 pod answers an IPv6 VIP from its IPv6 address.
	body, err := f.get(t, "http://"+netip.AddrPortFrom(f.waitIngresses(t, "v6only", 1)[0], 80).String()+"/")
	if err != nil || !strings.Contains(body, "IP: fd00:10:244:") {
		t.Errorf("an answer over IPv6 lists no pod address in %s (%v):\n%s", lab.ClusterCIDR6, err, body)
	}

	// An IPv6 ClusterIP from worker3, which runs no pod: the proxier's OUTPUT rules.
	clusterIP, err := netip.ParseAddr(created["v6only"].Spec.ClusterIP)
	if err != nil || !clusterIP.Is6() {
		t.Fatalf("Service v6only has ClusterIP %q (%v), want an IPv6 one of %s", created["v6only"].Spec.ClusterIP, err, lab.ServiceCIDR6)
	}
	w3, err := f.s.Worker("worker3")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + netip.AddrPortFrom(clusterIP, 80).String() + "/"
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "worker3 reaches the IPv6 ClusterIP "+url, func() error {
		body, err := labtest.Get(t.Context(), w3.Namespace, url)
		if err == nil && !strings.Contains(body, "Hostname: webpod") {
			err = fmt.Errorf("answer without a webpod Hostname:\n%s", body)
		}
		return err
	})

	t.Run("nodeport", func(t *testing.T) { testDualStackNodePort(t, f, created["v6only"]) })
	t.Run("local", func(t *testing.T) { testDualStackLocal(t, f) })
	t.Run("failover", func(t *testing.T) { testDualStackFailover(t, f) })
}

// testDualStackNodePort reaches the NodePort of svc, a SingleStack IPv6 Service of the
// walkthrough's pods, from the client on every worker's IPv6 address, worker3's too,
// which runs no pod and forwards to the others.
func testDualStackNodePort(t *testing.T, f *fullLab, svc *corev1.Service) {
	nodePort := svc.Spec.Ports[0].NodePort
	if nodePort == 0 {
		t.Fatalf("Service %s has no NodePort: %+v", svc.Name, svc.Spec.Ports)
	}
	for _, w := range f.s.Workers() {
		url := "http://" + netip.AddrPortFrom(w.Addr6, uint16(nodePort)).String() + "/"
		res := f.expectCurls(t, url, 20, "NodePort of "+svc.Name+" on "+w.Name)
		if n := res.Counts["Hostname: webpod1"] + res.Counts["Hostname: webpod2"]; n != 20 {
			t.Errorf("NodePort of %s on %s: %d of 20 requests to %s answered by webpod1 or webpod2: %v", svc.Name, w.Name, n, url, res.Counts)
		}
		t.Logf("%s: 20 requests answered, %v", url, res.Counts)
	}
}

// testDualStackLocal is TestLabLocalTrafficPolicy over IPv6: a SingleStack IPv6
// Service with externalTrafficPolicy Local whose one endpoint is webpod1, on worker.
// Its VIP is one the election gives first to another node, yet only worker answers
// NDP for it, from before the Service exists to the end; the requests reach webpod1,
// which sees the client's own IPv6 address.
func testDualStackLocal(t *testing.T, f *fullLab) {
	vip := freeIP6(f.usedIPs(t), func(ip netip.Addr) bool { return f.owner(ip) != "worker" })
	if !vip.IsValid() {
		t.Fatal("no free IPv6 address of the pool dual is elected first to a node other than worker")
	}
	watch := labtest.WatchNDP(t, f.clientNS, vip, 20*time.Millisecond)
	start := time.Now()
	single := corev1.IPFamilyPolicySingleStack
	f.createService(t, testkit.LBService("default", "local6",
		webpods, testkit.Annotated(heraldv1.AnnotationLoadBalancerIPs, vip.String()), func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &single, []corev1.IPFamily{corev1.IPv6Protocol}
			s.Spec.Selector = map[string]string{podLabel: "webpod1"}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}))
	if got := f.waitIngresses(t, "local6", 1); got[0] != vip {
		t.Fatalf("Service local6 asked for %s and got %v", vip, got)
	}
	t.Logf("%s: rendezvous order %v; the only local pod, webpod1, is on worker", vip, election.Order(vip, f.nodes))
	f.expectOwner(t, vip, "worker", "externalTrafficPolicy Local, the only endpoint on worker")
	f.expectLocalAnswers(t, vip, "webpod1")
	if macs := watch.MACsSince(start); !slices.Equal(macs, []string{f.macs["worker"]}) {
		t.Errorf("NDP for %s, a VIP of externalTrafficPolicy Local with its only endpoint on worker, was answered by %s; want worker only",
			vip, f.describeMACs(macs))
	}
}

// testDualStackFailover fails the owner of a dual-stack Service two ways, its cable
// pulled and its speaker killed with SIGKILL, twice each:
//
//   - Unwatched: the client, whose neighbour cache holds the owner's MAC for both VIPs
//     after one request to each, sends nothing more; both entries must move to the new
//     owner's MAC. For the IPv6 VIP only the new owner's unsolicited advertisement
//     (Override=1) can do that — answers to solicitations carry Override=0 and would
//     leave it (RFC 4861 §7.2.5); for the IPv4 VIP only its gratuitous ARP, which
//     updates an existing entry once the entry's locktime (1 s) has passed (hence the
//     announcer's repeats). Then both VIPs are answered by one MAC each, the same
//     node's, the next of the election's order, and requests over both families
//     succeed.
//   - Measured (MeasureFailovers): the same move seen by NDP, ARP and requests, with
//     requests succeeding again over both families.
//
// Both VIPs are chosen so that worker3, which runs no pod, owns them (see
// TestLabFailover).
func testDualStackFailover(t *testing.T, f *fullLab) {
	vips := f.dualStackServiceFor(t, "failover", "worker3")
	next := f.owner(vips[0], without(f.nodes, "worker3")...) // the group's key is its IPv4 VIP
	expectOwners := func(t *testing.T, owner, when string) {
		t.Helper()
		for _, vip := range vips {
			f.expectOwner(t, vip, owner, when)
		}
	}
	expectCurls := func(t *testing.T, n int, when string) {
		t.Helper()
		for _, vip := range vips {
			f.expectCurls(t, lab.VIPURL(vip), n, when)
		}
	}
	expectOwners(t, "worker3", "before the faults")
	expectCurls(t, 20, "before the faults")
	// backHome: once the fault is undone worker3 takes nothing back (no fail-back),
	// until a rebalance.
	backHome := func(t *testing.T, fault string) {
		t.Helper()
		expectOwners(t, next, "after "+fault+" was undone")
		f.rebalance(t, "failover")
		expectOwners(t, "worker3", "after "+fault+" was undone and a rebalance")
	}

	for _, c := range []struct {
		fault string
		undo  func(context.Context) error
	}{
		{lab.FaultLinkDown, func(ctx context.Context) error { return f.s.LinkUp(ctx, "worker3") }},
		{lab.FaultKill, func(ctx context.Context) error { return f.s.StartSpeaker(ctx, "worker3") }},
	} {
		t.Run(c.fault+"/unwatched", func(t *testing.T) {
			for _, vip := range vips {
				f.flushNeighbour(t, vip)
				if _, err := f.get(t, lab.VIPURL(vip)); err != nil {
					t.Fatalf("a request to %s before the fault: %v", vip, err)
				}
				if mac, entry := f.neighbourEntry(t, vip); mac != f.macs["worker3"] {
					t.Fatalf("test premise: after a request the client's entry for %s is %q, want worker3's MAC %s", vip, entry, f.macs["worker3"])
				}
			}
			heal := inflict(t, func(ctx context.Context) error { return f.s.Inflict(ctx, "worker3", c.fault) }, c.undo)
			for _, vip := range vips {
				var entry string
				err := testkit.Poll(labWait, 20*time.Millisecond, func() error {
					var mac string
					if mac, entry = f.neighbourEntry(t, vip); mac != f.macs[next] {
						return fmt.Errorf("entry %q", entry)
					}
					return nil
				})
				if err != nil {
					t.Errorf("after %s of worker3 the client's neighbour entry for %s is %q, want %s's MAC %s (its %s)",
						c.fault, vip, entry, next, f.macs[next], map[bool]string{true: "unsolicited advertisement", false: "gratuitous ARP"}[vip.Is6()])
				}
				t.Logf("after %s of worker3, with no traffic from the client: %s", c.fault, entry)
			}
			expectOwners(t, next, "after "+c.fault+" of the owner")
			expectCurls(t, 20, "after "+c.fault+" of the owner")
			heal()
			backHome(t, c.fault)
		})
		t.Run(c.fault+"/measured", func(t *testing.T) {
			res, err := f.s.MeasureFailovers(t.Context(), vips, c.fault)
			if res[0].OldOwner != "" {
				t.Cleanup(func() {
					if err := c.undo(context.Background()); err != nil {
						t.Errorf("undoing %s of worker3: %v", c.fault, err)
					}
				})
			}
			if err != nil {
				t.Fatalf("%s of the owner: %v", c.fault, err)
			}
			for _, r := range res {
				var b strings.Builder
				r.Print(&b)
				t.Log(strings.TrimSpace(b.String()))
				if r.OldOwner != "worker3" || r.NewOwner != next {
					t.Errorf("%s: %s went from %s to %s; want worker3 to %s", c.fault, r.VIP, r.OldOwner, r.NewOwner, next)
				}
				if !r.HTTP || !r.HTTPRecovered {
					t.Errorf("%s: requests to %s succeeded before the fault: %v; succeeded again after it: %v (%d failed)",
						c.fault, r.VIP, r.HTTP, r.HTTPRecovered, r.HTTPFailed)
				}
			}
			expectOwners(t, next, "after "+c.fault+" of the owner")
		})
		backHome(t, c.fault)
	}
	// A planned move of both VIPs (worker3 excluded by label) with five keep-alive
	// connections over each family: the new owner forwards them, over IPv4 and IPv6.
	t.Run("planned-move", func(t *testing.T) {
		both := map[string]netip.Addr{"ipv4": vips[0], "ipv6": vips[1]}
		res := f.probedConns(t, both, handoverConns, func() {
			f.setNodeLabel(t, "worker3", election.ExcludeLabel, ptrTo(""))
			expectOwners(t, next, "with worker3 excluded")
			time.Sleep(time.Second)
			for _, vip := range vips {
				f.expectForwarding(t, next, vip, "worker3", handoverConns)
			}
		})
		f.setNodeLabel(t, "worker3", election.ExcludeLabel, nil)
		expectNothingBroke(t, both, res)
		backHome(t, "the exclusion")
	})
}

// freeDualStackFirstFor picks free addresses of TestLabDualStack's pool, one per
// family, that the election gives first to node: it keys a dual-stack Service's group
// by the IPv4 VIP, so the IPv6 one can be any.
func (f *fullLab) freeDualStackFirstFor(tb testing.TB, node string) (v4, v6 netip.Addr) {
	tb.Helper()
	used := f.usedIPs(tb)
	for last := 250; last >= 200 && !v4.IsValid(); last-- {
		ip := netip.AddrFrom4([4]byte{172, 18, 255, byte(last)})
		if _, taken := used[ip]; !taken && election.Order(ip, f.nodes)[0] == node {
			v4 = ip
		}
	}
	v6 = freeIP6(used, nil)
	if !v4.IsValid() || !v6.IsValid() {
		tb.Fatalf("no free pair of pool dual for %s: IPv4 %s, IPv6 %s", node, v4, v6)
	}
	return v4, v6
}

// freeIP6 picks a free address of TestLabDualStack's pool's IPv6 range, from its top
// end, that ok accepts (any, when ok is nil); the zero Addr when there is none. It stays
// below ::fa, which the test expects no one to answer for.
func freeIP6(used map[netip.Addr]string, ok func(netip.Addr) bool) netip.Addr {
	for last := 0xf9; last >= 0xc8; last-- {
		ip := netip.MustParseAddr(fmt.Sprintf("fc00:f853:ccd:e793::%x", last))
		if _, taken := used[ip]; !taken && (ok == nil || ok(ip)) {
			return ip
		}
	}
	return netip.Addr{}
}

// neighbourEntry is the client's neighbour entry for ip as `ip neigh show` prints it,
// and its MAC ("" without one). Reading it sends nothing.
func (f *fullLab) neighbourEntry(tb testing.TB, ip netip.Addr) (mac, entry string) {
	tb.Helper()
	out, err := f.s.Exec(tb.Context(), lab.ClientHost, "ip", "neigh", "show", ip.String(), "dev", "eth0")
	if err != nil {
		tb.Fatalf("ip neigh show %s in the client: %v\n%s", ip, err, out)
	}
	entry = strings.TrimSpace(string(out))
	fields := strings.Fields(entry)
	if i := slices.Index(fields, "lladdr"); i >= 0 && i+1 < len(fields) {
		mac = fields[i+1]
	}
	return mac, entry
}

// flushNeighbour removes the client's neighbour entry for ip.
func (f *fullLab) flushNeighbour(tb testing.TB, ip netip.Addr) {
	tb.Helper()
	if out, err := f.s.Exec(tb.Context(), lab.ClientHost, "ip", "neigh", "flush", "to", ip.String(), "dev", "eth0"); err != nil {
		tb.Fatalf("ip neigh flush to %s in the client: %v\n%s", ip, err, out)
	}
}

// dualStackPool creates the pool dual, with an IPv4 and an IPv6 range, and an
// L2Advertisement of it.
func (f *fullLab) dualStackPool(tb testing.TB) {
	tb.Helper()
	f.createObject(tb, &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "dual"},
		Spec: heraldv1.IPAddressPoolSpec{Addresses: []heraldv1.AddressRange{
			"172.18.255.200-172.18.255.250", "fc00:f853:ccd:e793::c8-fc00:f853:ccd:e793::fa"}}})
	f.createObject(tb, &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "dual"},
		Spec: heraldv1.L2AdvertisementSpec{IPAddressPools: []string{"dual"}}})
}

// dualStackServiceFor creates a RequireDualStack LoadBalancer Service of the pool dual
// whose VIPs the election gives first to node, and returns them, IPv4 first.
func (f *fullLab) dualStackServiceFor(tb testing.TB, name, node string) []netip.Addr {
	tb.Helper()
	v4, v6 := f.freeDualStackFirstFor(tb, node)
	policy := corev1.IPFamilyPolicyRequireDualStack
	f.createService(tb, testkit.LBService("default", name, webpods,
		testkit.Annotated(heraldv1.AnnotationLoadBalancerIPs, v4.String()+","+v6.String()),
		func(svc *corev1.Service) { svc.Spec.IPFamilyPolicy = &policy }))
	vips := f.waitIngresses(tb, name, 2)
	if !slices.Contains(vips, v4) || !slices.Contains(vips, v6) {
		tb.Fatalf("Service %s asked for %s and %s and got %v", name, v4, v6, vips)
	}
	return []netip.Addr{v4, v6}
}

// waitIngresses waits until the Service has n external IPs and returns them in the
// order of its status.
func (f *fullLab) waitIngresses(tb testing.TB, name string, n int) []netip.Addr {
	tb.Helper()
	var vips []netip.Addr
	err := testkit.Poll(labWait, 100*time.Millisecond, func() error {
		svc, err := f.Kube.CoreV1().Services("default").Get(tb.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		vips = vips[:0]
		for _, in := range svc.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(in.IP)
			if err != nil {
				return fmt.Errorf("ingress %q: %w", in.IP, err)
			}
			vips = append(vips, ip)
		}
		if len(vips) != n {
			return fmt.Errorf("external IPs %v, want %d", vips, n)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("Service %s: %v", name, err)
	}
	return vips
}

// settledOwner waits until exactly one worker's MAC answers for vip from the client
// over a whole ownerWindow, asked every 10 ms over NDP for an IPv6 VIP and ARP for an
// IPv4 one, and returns it.
func (f *fullLab) settledOwner(tb testing.TB, vip netip.Addr, service string) string {
	tb.Helper()
	var w lab.NeighbourWatch
	if vip.Is6() {
		nw := labtest.WatchNDP(tb, f.clientNS, vip, 10*time.Millisecond)
		defer nw.Close()
		w = nw
	} else {
		aw := labtest.WatchARP(tb, f.clientNS, vip, 10*time.Millisecond)
		defer aw.Close()
		w = aw
	}
	var owner string
	labtest.WaitARP(tb, w, ownerWindow, labWait, "Service "+service, labtest.ARPWant{
		What: "exactly one, a worker's",
		OK: func(macs []string) bool {
			if len(macs) != 1 || !slices.Contains(slices.Collect(maps.Values(f.macs)), macs[0]) {
				return false
			}
			owner = macs[0]
			return true
		},
	}, f.hostOfMAC)
	return owner
}
