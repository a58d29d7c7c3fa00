package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/netns"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
)

// forgedSilenceBound is how long two forged replies may keep a VIP unanswered in this
// test: the documented 1 s first recheck plus its 200 ms probe round, with room for a
// busy machine.
const forgedSilenceBound = 4 * time.Second

// conflictClearBound is how soon the conflict must clear once the forger stops: the
// longest recheck wait (8 s) plus its probe round, with room for a busy machine.
const conflictClearBound = 10 * time.Second

// TestSpeakerForgedClaims: a host on the LAN, without the memberlist key, forges
// gratuitous ARP replies for a VIP. Frames whose ARP sender is not their Ethernet
// source change nothing; two well-formed ones 1 s apart make the owner yield, and
// the client finds the owner answering again within forgedSilenceBound. A forger that
// keeps on sending keeps the VIP unanswered no longer than contestedBound.
func TestSpeakerForgedClaims(t *testing.T) {
	c := newCluster(t, "hg-")
	forger := labtest.AddHost(t, c.Net, "forger", netip.MustParseAddr("172.18.0.51"))
	vip := c.LBService("svc1", "w1", nil)
	owner := c.Worker(election.Order(vip, []string{"w1", "w2", "w3"})[0])
	watch := labtest.WatchARP(t, c.Client.Namespace(), vip, 10*time.Millisecond)
	c.expectOwner(watch, owner, "before the forger")
	send := forgedARP(t, forger)

	// In another device's name: ARP sender MAC not the frame's source. Ignored entirely.
	stranger := net.HardwareAddr{0x02, 0xde, 0xad, 0xbe, 0xef, 0x01}
	from := time.Now()
	for range 3 {
		send(forger.MAC(), stranger, vip)
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if sum := watch.Summary(from, time.Now()); sum.Unanswered != 0 {
		t.Errorf("after forged replies in another MAC's name, %d of %d requests went unanswered (longest silence %v)", sum.Unanswered, sum.Requests, sum.Silence)
	}
	mismatch := `herald_l2_dropped_frames_total{reason="sender-mismatch"}`
	if v, ok := sampleValue(c.metrics(owner), mismatch); !ok || v < 3 {
		t.Errorf("%s on %s = %v (found %v), want at least 3", mismatch, owner.Name(), v, ok)
	}
	conflict := fmt.Sprintf(`herald_l2_conflict{ip="%s",mac="%s"}`, vip, stranger)
	if _, ok := sampleValue(c.metrics(owner), conflict); ok {
		t.Errorf("%s is set: a mismatched frame made the owner yield", conflict)
	}

	// In its own name, twice 1 s apart: the owner yields (RFC 5227) and takes the VIP
	// back once the forger is silent.
	send(forger.MAC(), forger.MAC(), vip)
	time.Sleep(time.Second)
	second := time.Now()
	send(forger.MAC(), forger.MAC(), vip)
	testkit.Eventually(t, 2*forgedSilenceBound, 10*time.Millisecond, owner.Name()+" answering again after the forged replies", func() error {
		if _, ok := watch.FirstFrom(owner.MAC().String(), second.Add(100*time.Millisecond)); !ok {
			return fmt.Errorf("no answer from %s since", owner.MAC())
		}
		return nil
	})
	back, _ := watch.FirstFrom(owner.MAC().String(), second.Add(100*time.Millisecond))
	sum := watch.Summary(second, back.Add(time.Millisecond))
	t.Logf("after the second forged reply, %s answered again after %v (the client's longest run of unanswered requests: %v, %d of %d requests)",
		owner.Name(), back.Sub(second).Round(time.Millisecond), sum.Silence.Round(time.Millisecond), sum.Unanswered, sum.Requests)
	if back.Sub(second) > forgedSilenceBound {
		t.Errorf("the VIP was unanswered for %v, more than %v", back.Sub(second), forgedSilenceBound)
	}

	// Ten times a second for 20 s: the forger answers every probe as a device holding
	// the address would. The owner yields, then answers again, contested, within the
	// longest yield while the forger still sends, stays answering, and clears the
	// conflict within the longest recheck wait (8 s) and a probe round once it stops.
	// The Events stay few: one conflict, rate-limited.
	suppressed := "herald_speaker_conflict_events_suppressed_total"
	eventsBefore := c.conflictEvents("svc1")
	suppressedBefore, _ := sampleValue(c.metrics(owner), suppressed)
	phase := time.Now()
	forging, stopForger := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(forging)
		for range 200 {
			select {
			case <-stopForger:
				return
			case <-time.After(100 * time.Millisecond):
			}
			send(forger.MAC(), forger.MAC(), vip)
		}
	}()
	// A failure below ends the test early: the forger stops before its socket closes.
	t.Cleanup(func() { close(stopForger); <-forging })
	// The forger's broadcast replies count as answers to some requests, so the yield
	// shows as many unanswered requests rather than one long silence.
	testkit.Eventually(t, 5*time.Second, 10*time.Millisecond, owner.Name()+" yielding to the forger", func() error {
		if sum := watch.Summary(phase, time.Now()); sum.Unanswered < yieldedRequests {
			return fmt.Errorf("%d of %d requests unanswered", sum.Unanswered, sum.Requests)
		}
		return nil
	})
	quiet := time.Now()
	testkit.Eventually(t, contestedBound, 10*time.Millisecond, owner.Name()+" answering again while the forger sends", func() error {
		if _, ok := watch.FirstFrom(owner.MAC().String(), quiet); !ok {
			return fmt.Errorf("no answer from %s since it yielded", owner.MAC())
		}
		return nil
	})
	back, _ = watch.FirstFrom(owner.MAC().String(), quiet)
	select {
	case <-forging:
		t.Errorf("the forger had stopped before %s answered again", owner.Name())
	default:
	}
	t.Logf("with a forger sending 10 replies a second, %s answered again %v after the forger began", owner.Name(), back.Sub(phase).Round(time.Millisecond))
	if back.Sub(phase) > contestedBound {
		t.Errorf("the VIP was unanswered for %v while the forger sent, more than %v", back.Sub(phase), contestedBound)
	}
	<-forging
	stop := time.Now()
	if sum := watch.Summary(back.Add(time.Second), stop); sum.Unanswered >= yieldedRequests {
		t.Errorf("contested, %d of %d requests went unanswered: the forger made %s yield again", sum.Unanswered, sum.Requests, owner.Name())
	}
	if v, ok := sampleValue(c.metrics(owner), "herald_l2_conflict_takebacks_total"); !ok || v != 1 {
		t.Errorf("herald_l2_conflict_takebacks_total on %s = %v (found %v), want 1", owner.Name(), v, ok)
	}
	conflict = fmt.Sprintf(`herald_l2_conflict{ip="%s",mac="%s"}`, vip, forger.MAC())
	testkit.Eventually(t, conflictClearBound, 100*time.Millisecond, "the conflict cleared after the forger stopped", func() error {
		if _, ok := sampleValue(c.metrics(owner), conflict); ok {
			return fmt.Errorf("%s still set", conflict)
		}
		return nil
	})
	t.Logf("the conflict cleared %v after the forger stopped", time.Since(stop).Round(100*time.Millisecond))
	if sum := watch.Summary(stop, time.Now()); sum.Silence > time.Second {
		t.Errorf("after the forger stopped the VIP was unanswered for %v", sum.Silence.Round(time.Millisecond))
	}
	// Events written and held back both count: an OnConflict per forged frame would
	// show in one or the other.
	if n := c.conflictEvents("svc1") - eventsBefore; n > 2 {
		t.Errorf("the forger made %d IPConflict Events in 20 s, want at most 2", n)
	}
	v, _ := sampleValue(c.metrics(owner), suppressed)
	t.Logf("%s on %s: %v before the forger's 20 s, %v after", suppressed, owner.Name(), suppressedBefore, v)
	if v-suppressedBefore > 2 {
		t.Errorf("%s on %s grew by %v in the forger's 20 s, want at most 2", suppressed, owner.Name(), v-suppressedBefore)
	}
}

// contestedBound is how long a forger answering every probe may keep a VIP unanswered:
// the longest yield and a generous margin for the yield itself and the client's
// requests.
const contestedBound = layer2.DefaultConflictYieldMax + 3*time.Second

// yieldedRequests is how many unanswered requests of the watch (one every 10 ms) show
// the owner yielded: half a second of them, far more than a loaded lab loses.
const yieldedRequests = 50

// conflictEvents counts the IPConflict Events on service, repeats included.
func (c *cluster) conflictEvents(service string) int {
	c.t.Helper()
	var evs eventsv1.EventList
	if err := c.API.List(c.t.Context(), &evs, client.InNamespace("default")); err != nil {
		c.t.Fatalf("listing Events: %v", err)
	}
	n := 0
	for _, e := range evs.Items {
		if e.Regarding.Name != service || e.Reason != heraldv1.ReasonIPConflict {
			continue
		}
		k := 1
		if e.Series != nil {
			k = max(k, int(e.Series.Count))
		}
		n += max(k, int(e.DeprecatedCount))
	}
	return n
}

// forgedARP opens a raw socket on h's eth0 and returns a function that broadcasts a
// gratuitous ARP reply for ip from the Ethernet source src naming sha as its sender.
func forgedARP(t *testing.T, h *netlab.Host) func(src, sha net.HardwareAddr, ip netip.Addr) {
	t.Helper()
	var conn *packet.Conn
	err := netns.Do(h.Namespace(), func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		conn, err = packet.Listen(ifi, packet.Raw, int(ethernet.EtherTypeARP), nil)
		return err
	})
	if err != nil {
		t.Fatalf("raw socket in %s: %v", h.Name(), err)
	}
	t.Cleanup(func() { conn.Close() })
	// Errors are reported with Errorf: the function may be called from a goroutine.
	return func(src, sha net.HardwareAddr, ip netip.Addr) {
		t.Helper()
		p := &arp.Packet{HardwareType: 1, ProtocolType: uint16(ethernet.EtherTypeIPv4), HardwareAddrLength: 6, IPLength: 4,
			Operation: arp.OperationReply, SenderHardwareAddr: sha, SenderIP: ip, TargetHardwareAddr: sha, TargetIP: ip}
		pb, err := p.MarshalBinary()
		if err != nil {
			t.Error(err)
			return
		}
		f := &ethernet.Frame{Destination: ethernet.Broadcast, Source: src, EtherType: ethernet.EtherTypeARP, Payload: pb}
		fb, err := f.MarshalBinary()
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := conn.WriteTo(fb, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
			t.Errorf("sending a forged reply from %s: %v", h.Name(), err)
		}
	}
}
