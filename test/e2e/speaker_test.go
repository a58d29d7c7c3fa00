package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
)

// Three speakers on one bridge, one VIP: exactly one MAC answers, the one of the node
// the election picks; when the owner is killed, cut off or stopped, the next node in
// the VIP's order answers; when it comes back, that node keeps answering alone (no
// fail-back) until a rebalance sends the VIP back.
func TestSpeakerOwnershipAndFailover(t *testing.T) {
	c := newCluster(t, "hs-")
	vip := c.LBService("svc1", "w1", nil)
	watch := labtest.WatchARP(t, c.Client.Namespace(), vip, 10*time.Millisecond)

	order := election.Order(vip, []string{"w1", "w2", "w3"})
	owner, next := c.Worker(order[0]), c.Worker(order[1])
	c.expectOwner(watch, owner, "first election")

	// The owner says so in its metrics and in an Event on the Service.
	if m := c.metrics(owner); !strings.Contains(m, fmt.Sprintf(`herald_l2_owner{ip="%s",node="%s",service="default/svc1"} 1`, vip, owner.Name())) {
		t.Errorf("owner %s does not export herald_l2_owner for %s", owner.Name(), vip)
	}
	if m := c.metrics(next); strings.Contains(m, "herald_l2_owner{") {
		t.Errorf("non-owner %s exports herald_l2_owner", next.Name())
	}
	c.expectEvent("svc1", fmt.Sprintf("announcing %s from %s on eth0, previous owner none", vip, owner.Name()))

	{ // kill -9
		at := time.Now()
		if err := c.speakers[owner.Name()].Kill(); err != nil {
			t.Fatal(err)
		}
		c.expectOwner(watch, next, "owner killed")
		c.logFailover(watch, next, at, "kill -9")
		// --restart-hold=0: on SIGTERM (below) it hands its IPs over at once instead of
		// having its peers hold them for its return.
		c.startSpeaker(owner, "--ml-join-interval", "1s", "--restart-hold", "0")
		c.expectOwner(watch, next, "owner restarted (no fail-back)")
		c.rebalance("svc1")
		c.expectOwner(watch, owner, "owner restarted, after a rebalance")
	}
	{ // link down
		at := time.Now()
		if err := owner.LinkDown(); err != nil {
			t.Fatal(err)
		}
		c.expectOwner(watch, next, "owner's link down")
		c.logFailover(watch, next, at, "link down")
		if err := owner.LinkUp(); err != nil {
			t.Fatal(err)
		}
		c.expectOwner(watch, next, "owner's link up again (no fail-back)")
		c.rebalance("svc1")
		c.expectOwner(watch, owner, "owner's link up again, after a rebalance")
	}
	{ // SIGTERM
		at := time.Now()
		p := c.speakers[owner.Name()]
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		c.expectOwner(watch, next, "owner stopped")
		c.logFailover(watch, next, at, "SIGTERM")
		if err := p.Wait(); err != nil {
			t.Errorf("speaker stopped by SIGTERM exited with %v; log:\n%s", err, netlab.LogTail(p.Log, 40))
		}
		c.expectEvent("svc1", fmt.Sprintf("announcing %s from %s on eth0, previous owner %s", vip, next.Name(), owner.Name()))
		m := c.metrics(next)
		// Both series exist before the takeover (at 0); the takeover counts 1 in each.
		for _, series := range []string{"herald_l2_failover_seconds_count", fmt.Sprintf(`herald_l2_leader_changes_total{ip="%s"}`, vip)} {
			if v, ok := sampleValue(m, series); !ok || v < 1 {
				t.Errorf("new owner %s: %s = %v (found: %v), want >= 1", next.Name(), series, v, ok)
			}
		}
	}
	{ // the advertisement allows only an interface the owner lacks
		var ad heraldv1.L2Advertisement
		c.update(client.ObjectKey{Namespace: heraldNS, Name: "my-l2-advertise"}, &ad, func() { ad.Spec.Interfaces = []string{"eth9"} })
		c.expectEvent("svc1", fmt.Sprintf("%s is elected to %s, which has none of the interfaces eth9 that the L2Advertisement allows (it answers on eth0)", vip, next.Name()))
		c.expectSilence(watch, "the only allowed interface is missing")
		c.update(client.ObjectKey{Namespace: heraldNS, Name: "my-l2-advertise"}, &ad, func() { ad.Spec.Interfaces = nil })
		c.expectOwner(watch, next, "every interface allowed again")
	}
	{ // no ready endpoint: nobody announces
		var es discoveryv1.EndpointSlice
		c.update(client.ObjectKey{Namespace: "default", Name: "svc1-1"}, &es, func() { es.Endpoints[0].Conditions.Ready = ptr.To(false) })
		c.expectSilence(watch, "no ready endpoint")
		c.update(client.ObjectKey{Namespace: "default", Name: "svc1-1"}, &es, func() { es.Endpoints[0].Conditions.Ready = ptr.To(true) })
		c.expectOwner(watch, next, "endpoint ready again")
	}
	{ // Service deleted: nobody answers any more
		if err := c.API.Delete(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "svc1"}}); err != nil {
			t.Fatal(err)
		}
		c.expectSilence(watch, "Service deleted")
		if m := c.metrics(next); strings.Contains(m, "herald_l2_owner{") {
			t.Errorf("%s still exports herald_l2_owner after the Service was deleted", next.Name())
		}
	}
}

// expectSilence waits until nobody answers for the VIP over a whole second.
func (c *cluster) expectSilence(w *lab.ARPWatch, when string) {
	c.t.Helper()
	labtest.WaitARP(c.t, w, time.Second, 30*time.Second, when, labtest.Silence(), c.HostOfMAC)
}

// update reads obj, applies change and writes it back, retrying on conflicts.
func (c *cluster) update(key client.ObjectKey, obj client.Object, change func()) {
	c.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := c.API.Get(context.Background(), key, obj); err != nil {
			return err
		}
		change()
		return c.API.Update(context.Background(), obj)
	})
	if err != nil {
		c.t.Fatalf("updating %T %s: %v", obj, key, err)
	}
}

// expectOwner waits until want, a worker or any other host, is the one MAC answering
// for the watched IP over a whole second. A node coming back waits until the node that
// stood in for it has let go (it never answers alongside it), so the stand-in may
// answer alone for a while first.
func (c *cluster) expectOwner(w *lab.ARPWatch, want *netlab.Host, when string) {
	c.t.Helper()
	labtest.WaitARP(c.t, w, time.Second, 30*time.Second, when, labtest.Owner(want.MAC().String()), c.HostOfMAC)
}

func (c *cluster) logFailover(w *lab.ARPWatch, to *netlab.Host, since time.Time, how string) {
	if first, ok := w.FirstFrom(to.MAC().String(), since); ok {
		c.t.Logf("%s: %s answered %v after the fault", how, to.Name(), first.Sub(since).Round(time.Millisecond))
	}
}

// expectEvent waits for an Event on the Service whose note is note.
func (c *cluster) expectEvent(service, note string) {
	c.t.Helper()
	c.expectEventMatching(service, note, func(n string) bool { return n == note })
}

// expectEventMatching waits for an Event on service whose note match accepts; want
// describes it in the failure.
func (c *cluster) expectEventMatching(service, want string, match func(note string) bool) {
	c.t.Helper()
	testkit.Eventually(c.t, waitFor, 200*time.Millisecond, "an Event "+want+" on "+service, func() error {
		var evs eventsv1.EventList
		if err := c.API.List(c.t.Context(), &evs, client.InNamespace("default")); err != nil {
			return err
		}
		var notes []string
		for _, e := range evs.Items {
			if e.Regarding.Name == service {
				if match(e.Note) {
					return nil
				}
				notes = append(notes, e.Reason+": "+e.Note)
			}
		}
		return fmt.Errorf("its Events: %q", notes)
	})
}

// sampleValue returns the value of series (name and labels exactly as exposed) in a
// Prometheus text exposition.
func sampleValue(exposition, series string) (float64, bool) {
	for line := range strings.SplitSeq(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v, err == nil
		}
	}
	return 0, false
}
