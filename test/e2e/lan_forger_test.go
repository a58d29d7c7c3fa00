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

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/netns"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/speaker/election"
)

// forgedSilenceBound is how long two forged replies may keep a VIP unanswered in this
// test: generous over the documented 1 s first recheck plus its 200 ms probe round.
const forgedSilenceBound = 15 * time.Second

// TestSpeakerForgedClaims: a host on the LAN, without the memberlist key, forges
// gratuitous ARP replies for a VIP. Frames whose ARP sender is not their Ethernet
// source change nothing; two well-formed ones 1 s apart make the owner yield, and
// the client finds the owner answering again within forgedSilenceBound.
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
	testenv.Eventually(t, 2*forgedSilenceBound, 10*time.Millisecond, owner.Name()+" answering again after the forged replies", func() error {
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

	// Ten times a second for 20 s: the forger is a device holding the address while it
	// keeps on (herald cannot tell it from one), and the owner takes the VIP back within
	// the longest recheck wait (8 s) and a probe round once it stops.
	for range 200 {
		send(forger.MAC(), forger.MAC(), vip)
		time.Sleep(100 * time.Millisecond)
	}
	stop := time.Now()
	testenv.Eventually(t, 2*forgedSilenceBound, 10*time.Millisecond, owner.Name()+" answering again after the forger stopped", func() error {
		if _, ok := watch.FirstFrom(owner.MAC().String(), stop.Add(100*time.Millisecond)); !ok {
			return fmt.Errorf("no answer from %s since", owner.MAC())
		}
		return nil
	})
	back, _ = watch.FirstFrom(owner.MAC().String(), stop.Add(100*time.Millisecond))
	t.Logf("after a forger sending 10 replies a second for 20 s stopped, %s answered again after %v", owner.Name(), back.Sub(stop).Round(time.Millisecond))
	if back.Sub(stop) > forgedSilenceBound {
		t.Errorf("the VIP was unanswered for %v after the forger stopped, more than %v", back.Sub(stop), forgedSilenceBound)
	}
	suppressed := "herald_speaker_conflict_events_suppressed_total"
	v, _ := sampleValue(c.metrics(owner), suppressed)
	t.Logf("%s on %s: %v", suppressed, owner.Name(), v)
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
	return func(src, sha net.HardwareAddr, ip netip.Addr) {
		t.Helper()
		p := &arp.Packet{HardwareType: 1, ProtocolType: uint16(ethernet.EtherTypeIPv4), HardwareAddrLength: 6, IPLength: 4,
			Operation: arp.OperationReply, SenderHardwareAddr: sha, SenderIP: ip, TargetHardwareAddr: sha, TargetIP: ip}
		pb, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		f := &ethernet.Frame{Destination: ethernet.Broadcast, Source: src, EtherType: ethernet.EtherTypeARP, Payload: pb}
		fb, err := f.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.WriteTo(fb, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
			t.Fatalf("sending a forged reply from %s: %v", h.Name(), err)
		}
	}
}
