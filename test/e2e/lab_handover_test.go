package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testkit"
)

// handoverConns is how many keep-alive connections each planned-move test keeps open
// through a VIP, each sending a request every restartEvery.
const handoverConns = 5

// TestLabRebalanceHandsOver moves VIPs that failed over earlier back to the nodes the
// hash places them on, as `herald rebalance` does, while the client sends each a short
// request and a request on each of five keep-alive connections every 100 ms. The new
// owner forwards the connections it does not know to the old owner, which still
// carries them: no request fails and no connection breaks, not even when a new
// owner's speaker restarts during the drain period.
func TestLabRebalanceHandsOver(t *testing.T) {
	f := fullLabFor(t)
	vips := maps.Clone(f.vips)
	f.expectOwners(t, vips, "before the failovers")
	owners := f.awayFromHome(t, vips)
	away := map[string]netip.Addr{}
	for name, vip := range vips {
		if owners[name] != f.owner(vip) {
			away[name] = vip
		}
	}
	watches := map[string]*lab.ARPWatch{}
	for name, vip := range away {
		watches[name] = labtest.WatchARP(t, f.clientNS, vip, 10*time.Millisecond)
	}
	var rebalanced time.Time
	res := f.probedConns(t, away, handoverConns, func() {
		rebalanced = time.Now()
		f.rebalance(t, slices.Sorted(maps.Keys(away))...)
		for _, name := range slices.Sorted(maps.Keys(away)) {
			f.expectOwner(t, away[name], f.owner(away[name]), name+" after the rebalance")
		}
		time.Sleep(2 * time.Second) // the connections go on through the new owners
		for _, name := range slices.Sorted(maps.Keys(away)) {
			f.expectForwarding(t, f.owner(away[name]), away[name], owners[name], handoverConns)
		}
		// A new owner's speaker restarts during the drain period (a rolling update):
		// the next speaker keeps the VIP and its forwarding.
		restarted := f.owner(away[slices.Sorted(maps.Keys(away))[0]])
		if err := f.s.StopSpeaker(restarted); err != nil {
			t.Fatalf("stopping the speaker of %s: %v", restarted, err)
		}
		time.Sleep(restartDown)
		if err := f.s.StartSpeaker(t.Context(), restarted); err != nil {
			t.Fatalf("starting the speaker of %s again: %v", restarted, err)
		}
		time.Sleep(2 * time.Second)
		for _, name := range slices.Sorted(maps.Keys(away)) {
			f.expectForwarding(t, f.owner(away[name]), away[name], owners[name], handoverConns)
		}
	})
	expectNothingBroke(t, away, res)
	// Never two answers: the old owner's last ARP answer came before the new owner's
	// first, as the client asked every 10 ms.
	for _, name := range slices.Sorted(maps.Keys(away)) {
		w := watches[name]
		w.Close()
		from, to := f.macs[owners[name]], f.macs[f.owner(away[name])]
		first, ok := w.FirstFrom(to, rebalanced)
		last, _ := w.LastFrom(from, rebalanced)
		switch {
		case !ok:
			t.Errorf("%s: %s never answered ARP after the rebalance", name, f.owner(away[name]))
		case last.After(first):
			t.Errorf("%s: %s answered ARP until %s, after %s's first answer at %s: two answers at once",
				name, owners[name], sinceFault(last, rebalanced), f.owner(away[name]), sinceFault(first, rebalanced))
		default:
			t.Logf("%s: %s answered %s after the rebalance, %s after %s's last answer", name, f.owner(away[name]),
				sinceFault(first, rebalanced), first.Sub(last).Round(time.Millisecond), owners[name])
		}
	}
}

// TestLabCordonHandsOver cordons the owner of a VIP whose pods all run elsewhere (a
// drained node), then, 10 s later, stops its speaker and pulls its cable (the node
// reboots). The VIP moves at the cordon, make-before-break: from the cordon to the
// end no short request fails, and the keep-alive connections open through the old
// owner keep working until its cable is pulled; only they break then. A connection
// opened after the move does not. The uncordon moves nothing back.
func TestLabCordonHandsOver(t *testing.T) {
	f := fullLabFor(t)
	f.plannedMoveThenPowerOff(t, plannedMove{
		name: "cordon", why: "cordoned",
		begin: func(node string) { f.cordon(t, node, true) },
		undo:  func(node string) { f.cordon(t, node, false) },
	})
}

// TestLabGracefulShutdownHandsOver is TestLabCordonHandsOver for a node that shuts down
// without a drain: its kubelet (the lab's agent) reports the graceful node shutdown
// systemd told it of (Ready=False, "node is shutting down") while the node's speaker,
// a system-node-critical pod, still runs. The VIP moves then, make-before-break, not
// when the speaker stops (which would look like a restart).
func TestLabGracefulShutdownHandsOver(t *testing.T) {
	f := fullLabFor(t)
	f.plannedMoveThenPowerOff(t, plannedMove{
		name: "graceful node shutdown", why: "shutting down",
		begin: func(node string) {
			if err := f.s.BeginNodeShutdown(node); err != nil {
				t.Fatalf("beginning the shutdown of %s: %v", node, err)
			}
		},
		undo: func(node string) {
			if err := f.s.CancelNodeShutdown(node); err != nil {
				t.Errorf("cancelling the shutdown of %s: %v", node, err)
			}
		},
	})
}

// TestLabScaleDownHandsOver is TestLabCordonHandsOver for cluster-autoscaler's
// scale-down, which taints the node ToBeDeletedByClusterAutoscaler before it drains
// and deletes it; the undo is the taint removed (a scale-down given up).
func TestLabScaleDownHandsOver(t *testing.T) {
	f := fullLabFor(t)
	f.plannedMoveThenPowerOff(t, plannedMove{
		name: "scale-down taint", why: "tainted " + autoscalerTaint,
		begin: func(node string) { f.taint(t, node, autoscalerTaint, true) },
		undo:  func(node string) { f.taint(t, node, autoscalerTaint, false) },
	})
}

// autoscalerTaint is the key of the taint cluster-autoscaler puts on a node it is
// about to delete (with effect NoSchedule and the time as value).
const autoscalerTaint = "ToBeDeletedByClusterAutoscaler"

// taint adds the NoSchedule taint key to node, or removes it, as
// cluster-autoscaler does.
func (f *fullLab) taint(tb testing.TB, node, key string, on bool) {
	tb.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := f.Kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
		if on {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: strconv.FormatInt(time.Now().Unix(), 10), Effect: corev1.TaintEffectNoSchedule})
		}
		_, err = f.Kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		tb.Fatalf("taint %s on %s = %t: %v", key, node, on, err)
	}
}

// plannedMove is what starts a planned move of a node's VIPs, and what undoes it.
type plannedMove struct {
	name, why   string // what it is; how the Events and VIPStatus name it
	begin, undo func(node string)
}

// plannedMoveThenPowerOff starts m on the owner of a VIP whose pods all run elsewhere
// (a drained node), then, 10 s later, stops its speaker and pulls its cable (the node
// reboots). The VIP moves at the start, make-before-break: from then to the end no
// short request fails, and the keep-alive connections open through the old owner keep
// working until its cable is pulled; only they break then. A connection opened after
// the move does not. Undoing m moves nothing back.
func (f *fullLab) plannedMoveThenPowerOff(t *testing.T, m plannedMove) {
	t.Helper()
	const old = "worker3" // runs no pod: drained
	vip := f.freeIPFirstFor(t, old)
	svc := f.createService(t, testkit.LBService("default", "planned", webpods,
		testkit.Annotated(heraldv1.AnnotationLoadBalancerIPs, vip.String())))
	defer f.deleteService(t, svc.Name)
	if got := f.waitIP(t, svc.Name); got != vip {
		t.Fatalf("Service %s asked for %s and got %s", svc.Name, vip, got)
	}
	f.expectOwner(t, vip, old, "before the "+m.name)
	next := f.owner(vip, without(f.nodes, old)...)
	url := "http://" + vip.String() + "/"
	short := lab.StartHTTPProbe(f.clientNS, url, restartEvery, restartTimeout)
	defer short.Stop()
	var before []*lab.KeepAliveProbe
	for range handoverConns {
		k, err := lab.StartKeepAliveProbe(f.clientNS, url, restartEvery, restartTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer k.Stop()
		before = append(before, k)
	}
	time.Sleep(time.Second) // every probe is under way

	began := time.Now()
	m.begin(old)
	undone := false
	defer func() {
		if !undone {
			m.undo(old)
		}
	}()
	f.expectOwner(t, vip, next, "after the "+m.name+" of "+old)
	if row := f.expectStatus(t, svc.Name, vip, next, "after the "+m.name+" of "+old); row.Reason != heraldv1.VIPReasonHandover ||
		!strings.Contains(row.Message, "taken from "+old+" ("+m.why+")") {
		t.Errorf("herald status after the %s: reason %q, message %q; want Handover, taken from %s (%s)", m.name, row.Reason, row.Message, old, m.why)
	}
	after, err := lab.StartKeepAliveProbe(f.clientNS, url, restartEvery, restartTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Stop()
	time.Sleep(time.Until(began.Add(10 * time.Second)))
	f.expectForwarding(t, next, vip, old, handoverConns)

	pulled := time.Now()
	if err := f.s.StopSpeaker(old); err != nil {
		t.Fatalf("stopping the speaker of %s: %v", old, err)
	}
	if err := f.s.LinkDown(t.Context(), old); err != nil {
		t.Fatalf("pulling %s's cable: %v", old, err)
	}
	time.Sleep(3 * time.Second)
	end := time.Now()

	n, failed := short.Between(began, end)
	t.Logf("short requests from the %s to the end: %d, failed %d", m.name, n, len(failed))
	for i, fl := range failed {
		if i == 5 {
			t.Errorf("... and %d more", len(failed)-5)
			break
		}
		t.Errorf("a short request failed at %s: %v", sinceFault(fl.Start, began), fl.Err)
	}
	brokeAtPull := 0
	for i, k := range before {
		n, failed := k.Between(began, pulled)
		breaks, _ := k.Breaks()
		t.Logf("connection %d, opened before the %s: %d requests until the pull, %d failed, %d breaks in all", i, m.name, n, len(failed), len(breaks))
		if n == 0 {
			t.Errorf("connection %d: no request measured between the %s and the pull", i, m.name)
		}
		for _, fl := range failed {
			t.Errorf("connection %d, opened before the %s: a request failed at %s, before the cable was pulled: %v", i, m.name, sinceFault(fl.Start, began), fl.Err)
		}
		for _, b := range breaks {
			if b.Start.Before(pulled) {
				t.Errorf("connection %d broke at %s, before the cable was pulled: %v", i, sinceFault(b.Start, began), b.Err)
			} else {
				brokeAtPull++
			}
		}
	}
	t.Logf("%d of %d connections opened through %s broke when its cable was pulled (expected: they lived on its kernel)", brokeAtPull, handoverConns, old)
	if breaks, dials := after.Breaks(); len(breaks) > 0 || dials != 1 {
		t.Errorf("the connection opened after the move broke %d times (%d dials): %v", len(breaks), dials, breaks)
	}

	if err := f.s.LinkUp(t.Context(), old); err != nil {
		t.Fatalf("plugging %s's cable back in: %v", old, err)
	}
	// The node's neighbour entries failed while its cable was out: its first dials
	// may find no route for a second.
	if err := testkit.Poll(15*time.Second, time.Second, func() error { return f.s.StartSpeaker(t.Context(), old) }); err != nil {
		t.Fatalf("starting the speaker of %s again: %v", old, err)
	}
	f.waitAllInQuorum(t)
	m.undo(old)
	undone = true
	time.Sleep(3 * time.Second) // the speakers elect on the undo
	f.expectOwner(t, vip, next, "after the "+m.name+" of "+old+" was undone (no fail-back)")
	// The forwarding ended when the old owner went: the VIPStatus and the Events say so.
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "herald status without the handover", func() error {
		if row := f.expectStatus(t, svc.Name, vip, next, "after the handover"); row.Reason != "" {
			return fmt.Errorf("reason %q, message %q", row.Reason, row.Message)
		}
		return nil
	})
	f.expectServiceEvent(t, svc.Name, heraldv1.ReasonHandover, "moves from "+old+" ("+m.why+") to "+next)
	f.expectServiceEvent(t, svc.Name, heraldv1.ReasonHandoverEnded, "the old owner is gone")
}

// expectServiceEvent waits for an Event of reason on the Service whose note holds text.
func (f *fullLab) expectServiceEvent(tb testing.TB, service, reason, text string) {
	tb.Helper()
	testkit.Eventually(tb, labtest.Wait, labtest.Interval, "a "+reason+" Event on "+service+" with "+text, func() error {
		list, err := f.Kube.EventsV1().Events("default").List(tb.Context(), metav1.ListOptions{FieldSelector: "regarding.name=" + service})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Reason == reason && strings.Contains(e.Note, text) {
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return fmt.Errorf("Events: %q", seen)
	})
}

// cordon sets or clears spec.unschedulable of node, as kubectl cordon and uncordon do.
func (f *fullLab) cordon(tb testing.TB, node string, on bool) {
	tb.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := f.Kube.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		tb.Fatalf("cordon %s = %t: %v", node, on, err)
	}
}

// expectForwarding checks, in node's nftables, that node forwards to from the flows of
// vip it does not know, that at least flows of them went that way, and that node's
// herald_handovers_forwarding counts it.
func (f *fullLab) expectForwarding(tb testing.TB, node string, vip netip.Addr, from string, flows int) {
	tb.Helper()
	daddr := "ip daddr "
	host, err := f.s.Worker(from)
	if err != nil {
		tb.Fatal(err)
	}
	to := host.Addr
	if vip.Is6() {
		daddr, to = "ip6 daddr ", host.Addr6
	}
	text, err := f.handoverTable(tb, node, vip)
	if err != nil {
		tb.Errorf("listing %s's handover table: %v\n%s", node, err, text)
		return
	}
	if !strings.Contains(text, daddr+vip.String()+" ") || !strings.Contains(text, "dup to "+to.String()) {
		tb.Errorf("%s does not forward %s to %s (%s):\n%s", node, vip, from, to, text)
		return
	}
	if metrics, err := f.s.Scrape(tb.Context(), node); err != nil {
		tb.Errorf("scraping %s: %v", node, err)
	} else if v, _ := sampleValue(metrics, "herald_handovers_forwarding"); v < 1 {
		tb.Errorf("%s: herald_handovers_forwarding = %v while it forwards %s, want at least 1", node, v, vip)
	}
	if got := flowsOf(text, vip); got < flows {
		tb.Errorf("%s forwarded %d flows of %s to %s, want at least %d:\n%s", node, got, vip, from, flows, text)
	} else {
		tb.Logf("%s forwards %d flows of %s to %s", node, got, vip, from)
	}
}
