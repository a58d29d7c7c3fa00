package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/testkit"
)

// BenchmarkPartition measures, from the client namespace, over trials
// (HERALD_FAILOVER_TRIALS, default 10) what a LAN host sees when:
//
//   - the owner of a VIP is cut off from memberlist (port 7946 dropped both ways in
//     its namespace; the API server and the LAN stay reachable): from the fault to the
//     first ARP reply of the new owner, to the old owner's last reply, and how long
//     two MACs answered at once (requests answered by both, times the request
//     interval);
//   - a device that is no speaker takes the VIP (a kernel address plus gratuitous ARP
//     from a "printer" namespace): from its gratuitous ARP to the owner's last reply
//     (how long the owner takes to notice and yield).
//
// Run it with -benchtime=1x: one iteration is the whole series (`make bench` does).
func BenchmarkPartition(b *testing.B) {
	trials := 10
	if v, err := strconv.Atoi(os.Getenv("HERALD_FAILOVER_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	const every = 5 * time.Millisecond
	c := newCluster(b, "hb-", "--gratuitous-refresh", conflictRefresh.String())
	printer := labtest.AddHost(b, c.Net, "printer", netip.MustParseAddr("172.18.0.50"))
	vip := c.LBService("svc1", "w1", nil)
	watch := labtest.WatchARP(b, c.Client.Namespace(), vip, every)

	for b.Loop() {
		var handover, lastOld, double []time.Duration
		for range trials {
			mac, err := watch.Settle(time.Second, 30*time.Second)
			if err != nil {
				b.Fatalf("before the partition: %v", err)
			}
			owner := c.WorkerByMAC(mac)
			if err := cutMemberlist(owner, true); err != nil {
				b.Fatal(err)
			}
			at := time.Now() // the cut is in effect: the clock starts here
			next, err := watch.Settle(time.Second, 30*time.Second, mac)
			if err != nil {
				b.Fatalf("partition of %s: %v", owner.Name(), err)
			}
			first, _ := watch.FirstFrom(next, at)
			last, ok := watch.LastFrom(mac, at)
			if !ok {
				last = at
			}
			s := watch.Summary(at, time.Now())
			handover = append(handover, first.Sub(at))
			lastOld = append(lastOld, last.Sub(at))
			double = append(double, time.Duration(len(s.Doubled))*every)
			if err := cutMemberlist(owner, false); err != nil {
				b.Fatal(err)
			}
			// No fail-back: the healed owner gets its VIP back only on a rebalance.
			c.expectOwner(watch, c.WorkerByMAC(next), "partition healed")
			c.rebalance("svc1")
			c.expectOwner(watch, owner, "partition healed, after a rebalance")
		}
		report(b, "partition-new-owner", handover)
		report(b, "partition-old-owner-last", lastOld)
		report(b, "partition-two-macs", double)

		var yield []time.Duration
		for range trials {
			mac, err := watch.Settle(time.Second, 30*time.Second)
			if err != nil {
				b.Fatalf("before the conflict: %v", err)
			}
			// The clock starts before: holdAddress adds the address, then its gratuitous
			// ARP goes out at once, and arping takes a second more to return.
			at := time.Now()
			if err := holdAddress(b.Context(), printer, vip, true); err != nil {
				b.Fatal(err)
			}
			if _, err := watch.Settle(time.Second, 30*time.Second, mac); err != nil {
				b.Fatalf("conflict: %v", err)
			}
			last, ok := watch.LastFrom(mac, at)
			if !ok {
				last = at
			}
			yield = append(yield, last.Sub(at))
			if err := holdAddress(b.Context(), printer, vip, false); err != nil {
				b.Fatal(err)
			}
			if _, err := watch.Settle(time.Second, 30*time.Second, printer.MAC().String()); err != nil {
				b.Fatalf("after the conflict: %v", err)
			}
		}
		report(b, "conflict-yield", yield)
	}
}

func report(b *testing.B, name string, ds []time.Duration) {
	med, p95 := testkit.Quantile(ds, 0.5), testkit.Quantile(ds, 0.95)
	b.ReportMetric(med.Seconds()*1000, name+"-median-ms")
	b.ReportMetric(p95.Seconds()*1000, name+"-p95-ms")
	b.Logf("%-26s trials=%d median=%v p95=%v max=%v", name, len(ds), med.Round(time.Millisecond),
		p95.Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond))
}

// cutMemberlist drops (or stops dropping) memberlist's port, TCP and UDP both ways,
// in h's namespace.
func cutMemberlist(h *netlab.Host, cut bool) error {
	op := "-I"
	if !cut {
		op = "-D"
	}
	for _, rule := range [][]string{
		{"INPUT", "-p", "tcp", "--dport", "7946"}, {"INPUT", "-p", "udp", "--dport", "7946"},
		{"OUTPUT", "-p", "tcp", "--dport", "7946"}, {"OUTPUT", "-p", "udp", "--dport", "7946"},
	} {
		args := append([]string{"iptables", "-w", op}, append(rule, "-m", "comment", "--comment", "herald-bench partition", "-j", "DROP")...)
		if out, err := h.Exec(context.Background(), args...); err != nil {
			return fmt.Errorf("%v: %w: %s", args, err, out)
		}
	}
	return nil
}

// holdAddress makes h hold ip as a kernel address and announce it with gratuitous ARP
// (the kernel then answers every ARP request for it), or give it up.
func holdAddress(ctx context.Context, h *netlab.Host, ip netip.Addr, hold bool) error {
	if !hold {
		if out, err := h.Exec(ctx, "ip", "addr", "del", ip.String()+"/32", "dev", "eth0"); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if out, err := h.Exec(ctx, "ip", "addr", "add", ip.String()+"/32", "dev", "eth0"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	// arping (Debian's, Thomas Habets'): -U sends unsolicited ARP from -S. It exits
	// non-zero when nothing answers, which is what a gratuitous ARP expects.
	out, err := h.Exec(ctx, "arping", "-U", "-c", "2", "-i", "eth0", "-S", ip.String(), ip.String())
	if err != nil && !strings.Contains(string(out), "2 packets transmitted") {
		return fmt.Errorf("arping -U: %w: %s", err, out)
	}
	return nil
}
