package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
)

// conflictRefresh is the speakers' --gratuitous-refresh here: short, so that the
// "no gratuitous-ARP war" check spans several refreshes.
const conflictRefresh = 2 * time.Second

// TestSpeakerAddressConflict puts a foreign device (a "printer", a namespace on the
// LAN that is no speaker) on a pool address: while a speaker owns the IP, and before
// a new Service's IP was ever announced. The speaker must notice it on the wire, stop
// answering rather than fight, say so (Event, VIPStatus, metric), answer again beside
// it after the longest yield, and announce the IP again once the device is gone.
func TestSpeakerAddressConflict(t *testing.T) {
	c := newCluster(t, "hc-", "--gratuitous-refresh", conflictRefresh.String())
	printer := labtest.AddHost(t, c.Net, "printer", netip.MustParseAddr("172.18.0.50"))

	// While owning: the printer takes svc1's VIP by hand and announces it.
	vip := c.LBService("svc1", "w1", nil)
	owner := c.Worker(election.Order(vip, []string{"w1", "w2", "w3"})[0])
	watch := labtest.WatchARP(t, c.Client.Namespace(), vip, 10*time.Millisecond)
	c.expectOwner(watch, owner, "before the printer")
	claimed := time.Now()
	claim(t, printer, vip, true)
	c.expectOwner(watch, printer, "the printer claims "+vip.String())
	// No gratuitous-ARP war: once yielded, the owner stays quiet while the printer is
	// there, for the longest yield.
	quiet := time.Now()
	time.Sleep(2 * conflictRefresh)
	if time.Since(claimed) > layer2.DefaultConflictYieldMax {
		t.Logf("the quiet check ended %v after the claim, past the longest yield", time.Since(claimed))
	} else if macs := watch.MACsSince(quiet); len(macs) != 1 || macs[0] != printer.MAC().String() {
		t.Errorf("while the printer holds %s, the MACs answering were %v, want only the printer's %s", vip, macs, printer.MAC())
	}
	c.expectEventPrefix("svc1", fmt.Sprintf("%s is claimed by %s on eth0, a device that is not a herald speaker: %s stopped answering for it", vip, printer.MAC(), owner.Name()))
	c.expectVIPReason(vip, "IPConflict", printer.MAC().String())
	sample := fmt.Sprintf(`herald_l2_conflict{ip="%s",mac="%s"}`, vip, printer.MAC())
	if v, ok := sampleValue(c.metrics(owner), sample); !ok || v != 1 {
		t.Errorf("%s on %s = %v (found %v), want 1", sample, owner.Name(), v, ok)
	}
	// After the longest yield the owner answers again beside the printer, the conflict
	// still reported.
	testkit.Eventually(t, contestedBound, 10*time.Millisecond, owner.Name()+" answering again, contested", func() error {
		if _, ok := watch.FirstFrom(owner.MAC().String(), quiet); !ok {
			return fmt.Errorf("no answer from %s since it yielded", owner.MAC())
		}
		return nil
	})
	if v, ok := sampleValue(c.metrics(owner), sample); !ok || v != 1 {
		t.Errorf("contested, %s on %s = %v (found %v), want 1", sample, owner.Name(), v, ok)
	}
	c.expectVIPReason(vip, "IPConflict", printer.MAC().String())
	claim(t, printer, vip, false)
	c.expectOwner(watch, owner, "the printer gave the address back")
	c.expectVIPReason(vip, "", "")

	// Before the first announcement: the printer holds the next free address, and a new
	// Service gets it. The speaker probes first and never announces it.
	next := c.nextFree()
	claim(t, printer, next, true)
	watch2 := labtest.WatchARP(t, c.Client.Namespace(), next, 10*time.Millisecond)
	if got := c.LBService("svc2", "w1", nil); got != next {
		t.Fatalf("svc2 got %s, want the next free address %s", got, next)
	}
	owner2 := c.Worker(election.Order(next, []string{"w1", "w2", "w3"})[0])
	c.expectEventPrefix("svc2", fmt.Sprintf("%s is claimed by %s on eth0, a device that is not a herald speaker: %s found it in use before announcing it", next, printer.MAC(), owner2.Name()))
	if macs := watch2.MACsSince(time.Time{}); len(macs) != 1 || macs[0] != printer.MAC().String() {
		t.Errorf("for %s, in use by the printer before svc2 got it, the MACs answering were %v, want only the printer's", next, macs)
	}
	claim(t, printer, next, false)
	c.expectOwner(watch2, owner2, "the printer gave the second address back")
}

func (c *cluster) expectEventPrefix(service, prefix string) {
	c.t.Helper()
	c.expectEventMatching(service, prefix+"...", func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// claim makes h hold ip as a kernel address and announce it (holdAddress), or give it
// up, failing the test on an error.
func claim(t *testing.T, h *netlab.Host, ip netip.Addr, hold bool) {
	t.Helper()
	if err := holdAddress(t.Context(), h, ip, hold); err != nil {
		t.Fatalf("%s holding %s (%v): %v", h.Name(), ip, hold, err)
	}
}

// expectVIPReason waits until the VIPStatus of ip in default has reason (and a
// message containing msg), or no reason and a node when reason is "".
func (c *cluster) expectVIPReason(ip netip.Addr, reason, msg string) {
	c.t.Helper()
	key := client.ObjectKey{Namespace: "default", Name: heraldv1.VIPStatusName(ip)}
	testkit.Eventually(c.t, waitFor, 100*time.Millisecond, fmt.Sprintf("VIPStatus %s with reason %q and %q", key.Name, reason, msg), func() error {
		var v heraldv1.VIPStatus
		if err := c.API.Get(c.t.Context(), key, &v); err != nil {
			return err
		}
		s := v.Status
		if s.Reason == reason && strings.Contains(s.Message, msg) && (reason != "" || s.Node != "") {
			return nil
		}
		return fmt.Errorf("node %q reason %q message %q", s.Node, s.Reason, s.Message)
	})
}

// nextFree is the lowest pool address no Service holds: the one the controller gives
// next (a fresh pool hands addresses out in ascending order).
func (c *cluster) nextFree() netip.Addr {
	c.t.Helper()
	var svcs corev1.ServiceList
	if err := c.API.List(context.Background(), &svcs); err != nil {
		c.t.Fatal(err)
	}
	used := map[netip.Addr]bool{}
	for _, s := range svcs.Items {
		for _, ing := range s.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(ing.IP); err == nil {
				used[ip] = true
			}
		}
	}
	for ip := netip.MustParseAddr("172.18.255.200"); ; ip = ip.Next() {
		if !used[ip] {
			return ip
		}
	}
}
