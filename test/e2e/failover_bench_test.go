package e2e

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/testkit"
)

// BenchmarkFailover measures, from the client namespace, how long a VIP stays
// unanswered when its owner fails: from the fault to the first ARP reply from another
// MAC, over trials of each fault (HERALD_FAILOVER_TRIALS, default 10). It also
// compares ARP round trips per second answered by a herald responder (for the VIP)
// with the kernel answering for its own address, in the same namespaces. Run it with
// -benchtime=1x: one iteration is the whole series (`make bench` does).
func BenchmarkFailover(b *testing.B) {
	trials := 10
	if v, err := strconv.Atoi(os.Getenv("HERALD_FAILOVER_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	c := newCluster(b, "hb-")
	vip := c.LBService("svc1", "w1", nil)
	watch := labtest.WatchARP(b, c.Client.Namespace(), vip, 5*time.Millisecond)

	faults := []struct {
		name           string
		fault, restore func(h *netlab.Host) error
	}{
		{"link-down", (*netlab.Host).LinkDown, (*netlab.Host).LinkUp},
		{"kill-9", func(h *netlab.Host) error { return c.speakers[h.Name()].Kill() }, c.restartSpeaker},
	}
	for b.Loop() {
		for _, f := range faults {
			var ds []time.Duration
			for range trials {
				mac, err := watch.Settle(time.Second, 30*time.Second)
				if err != nil {
					b.Fatalf("%s: before the fault: %v", f.name, err)
				}
				owner := c.WorkerByMAC(mac)
				if err := f.fault(owner); err != nil {
					b.Fatal(err)
				}
				at := time.Now() // the fault is in effect: the clock starts here
				// The interruption ends with the first answer of the MAC that took over.
				next, err := watch.Settle(time.Second, 30*time.Second, mac)
				if err != nil {
					b.Fatalf("%s of %s: %v", f.name, owner.Name(), err)
				}
				first, _ := watch.FirstFrom(next, at)
				ds = append(ds, first.Sub(at))
				if err := f.restore(owner); err != nil {
					b.Fatal(err)
				}
			}
			med, p95 := testkit.Quantile(ds, 0.5), testkit.Quantile(ds, 0.95)
			b.ReportMetric(med.Seconds()*1000, f.name+"-median-ms")
			b.ReportMetric(p95.Seconds()*1000, f.name+"-p95-ms")
			b.Logf("failover %-9s trials=%d median=%v p95=%v max=%v", f.name, len(ds), med.Round(time.Millisecond),
				p95.Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond))
		}
		watch.Close()

		mac, owner := "", (*netlab.Host)(nil)
		for _, w := range c.Workers { // the owner after the last restore
			if c.answers(w, vip) {
				owner, mac = w, w.MAC().String()
			}
		}
		if owner == nil {
			b.Fatal("nobody answers for the VIP after the series")
		}
		herald, err := lab.RoundTrips(c.Client.Namespace(), vip, mac, 3000)
		if err != nil {
			b.Fatal(err)
		}
		kernel, err := lab.RoundTrips(c.Client.Namespace(), owner.Addr(), mac, 3000)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(herald, "herald-arp-replies/s")
		b.ReportMetric(kernel, "kernel-arp-replies/s")
		b.Logf("ARP round trips/s, one at a time from the client: herald responder %.0f, kernel %.0f (ratio %.2f)", herald, kernel, herald/kernel)
	}
}

func (c *cluster) restartSpeaker(h *netlab.Host) error {
	p := c.speakers[h.Name()]
	_ = p.Wait()
	c.startSpeaker(h, "--ml-join-interval", "1s")
	return nil
}

// answers says whether h's MAC answers ARP for ip, asked from the client.
func (c *cluster) answers(h *netlab.Host, ip netip.Addr) bool {
	_, err := lab.RoundTrips(c.Client.Namespace(), ip, h.MAC().String(), 1)
	return err == nil
}

// BenchmarkFailoverDualStack measures a failover of both families at once, on the
// dual-stack lab (lab.Config.DualStack), for link-down of the owner of a
// RequireDualStack Service (worker3, which runs no pod), over trials of each fault
// (HERALD_FAILOVER_TRIALS, default 10): from the fault in effect to the new owner's
// first answer to the client, by NDP for the IPv6 VIP and ARP for the IPv4 one, and to
// the first request that started after the fault and succeeded (lab.MeasureFailovers).
// Both families see the same fault, so the two are comparable with each other; the
// IPv4 figures of BenchmarkFailover come from a lighter cluster. Then it compares
// NDP (and ARP) round trips per second answered by herald for the VIPs with the kernel
// answering for worker3's own addresses. -benchtime=1x.
func BenchmarkFailoverDualStack(b *testing.B) {
	trials := 10
	if v, err := strconv.Atoi(os.Getenv("HERALD_FAILOVER_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	f := ownLab(b, dualStackPrefix, "dualbench", lab.Config{Workers: 3, DualStack: true}, false)
	f.dualStackPool(b)
	vips := f.dualStackServiceFor(b, "failover", "worker3")
	faults := []struct {
		name string
		undo func(context.Context) error
	}{
		{lab.FaultLinkDown, func(ctx context.Context) error { return f.s.LinkUp(ctx, "worker3") }},
	}
	for b.Loop() {
		for _, fault := range faults {
			answer := make([][]time.Duration, len(vips)) // by VIP
			request := make([][]time.Duration, len(vips))
			for range trials {
				for _, vip := range vips {
					f.expectOwner(b, vip, "worker3", "before "+fault.name)
				}
				res, err := f.s.MeasureFailovers(b.Context(), vips, fault.name)
				if res[0].OldOwner != "" {
					if err := fault.undo(b.Context()); err != nil {
						b.Fatalf("undoing %s of worker3: %v", fault.name, err)
					}
					f.rebalance(b, "failover") // no fail-back: back to worker3 on purpose
				}
				if err != nil {
					b.Fatalf("%s of worker3: %v", fault.name, err)
				}
				for i, r := range res {
					if !r.HTTP || !r.HTTPRecovered {
						b.Fatalf("%s of worker3: requests to %s succeeded before: %v, again after: %v", fault.name, r.VIP, r.HTTP, r.HTTPRecovered)
					}
					answer[i] = append(answer[i], r.AnswerGap)
					request[i] = append(request[i], r.HTTPGap)
				}
			}
			for i, vip := range vips {
				family, by := "ipv4", "arp"
				if vip.Is6() {
					family, by = "ipv6", "ndp"
				}
				med, reqMed := testkit.Quantile(answer[i], 0.5), testkit.Quantile(request[i], 0.5)
				b.ReportMetric(med.Seconds()*1000, fault.name+"-"+family+"-"+by+"-median-ms")
				b.ReportMetric(reqMed.Seconds()*1000, fault.name+"-"+family+"-http-median-ms")
				b.Logf("failover %-9s %s trials=%d %s answer median=%v max=%v; first request ok median=%v max=%v", fault.name, vip, trials, by,
					med.Round(time.Millisecond), slices.Max(answer[i]).Round(time.Millisecond),
					reqMed.Round(time.Millisecond), slices.Max(request[i]).Round(time.Millisecond))
			}
		}

		// One responder's pace, herald's for a VIP beside the kernel's for the same
		// node's own address, one question at a time from the client.
		w3, err := f.s.Worker("worker3")
		if err != nil {
			b.Fatal(err)
		}
		for _, vip := range vips {
			f.expectOwner(b, vip, "worker3", "after the series")
			by, own := "arp", w3.Addr
			if vip.Is6() {
				by, own = "ndp", w3.Addr6
			}
			herald, err := lab.RoundTrips(f.clientNS, vip, w3.MAC, 3000)
			if err != nil {
				b.Fatal(err)
			}
			kernel, err := lab.RoundTrips(f.clientNS, own, w3.MAC, 3000)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(herald, "herald-"+by+"-answers/s")
			b.ReportMetric(kernel, "kernel-"+by+"-answers/s")
			b.Logf("%s round trips/s, one at a time from the client: herald for %s %.0f, the kernel for %s %.0f (ratio %.2f)",
				by, vip, herald, own, kernel, herald/kernel)
		}
	}
}
