package layer2

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/mdlayher/arp"
	"github.com/prometheus/client_golang/prometheus"
)

// The fuzz targets feed arbitrary bytes to the per-packet handling. Invariants: no
// panic; a frame is either answered (with a well-formed reply from the interface's MAC
// to a unicast MAC, for an owned IP that is not quiet) or dropped for one of the known
// reasons; serveFrame counts exactly one outcome; a claim is reported exactly when the
// frame is dropped as one.

func FuzzARPHandle(f *testing.F) {
	zero := make(net.HardwareAddr, 6)
	for _, seed := range [][]byte{
		arpRequest(vip4),
		arpRequest(peer4),
		arpBytes(ourMAC, peerMAC, 1, peerMAC, peer4, ourMAC, vip4),
		arpBytes(bcast, peerMAC, 2, peerMAC, peer4, zero, vip4),
		arpBytes(bcast, ourMAC, 1, ourMAC, vip4, zero, vip4),
		arpRequest(vip4)[:20],
		arpBytes(ourMAC, otherMAC, 2, otherMAC, vip4, ourMAC, peer4),
		arpBytes(bcast, otherMAC, 1, otherMAC, vip4, zero, vip4),
		arpBytes(bcast, otherMAC, 2, otherMAC, vip4Quiet, otherMAC, vip4Quiet),
		arpRequest(vip4Quiet),
		{},
	} {
		f.Add(seed)
	}
	claims := 0
	// shared by the calls of one worker, which run one at a time
	r, c, m := newTestARP(f, WithSightingHandler(func(Sighting) { claims++ }))
	f.Fuzz(func(t *testing.T, b []byte) {
		before := outcomes(m, m.ARPReplies)
		claimsBefore := claims
		reply, dst, reason := r.handle(b)
		if (claims > claimsBefore) != (reason == DropClaim) || claims > claimsBefore+1 {
			t.Fatalf("%d claims reported for a frame dropped as %q", claims-claimsBefore, reason)
		}
		switch {
		case reason == "":
			if !unicastMAC(dst) {
				t.Fatalf("reply to non-unicast MAC %s", dst)
			}
			fr, p := parseARPFrame(t, reply)
			if p.Operation != arp.OperationReply || !bytes.Equal(fr.Source, ourMAC) || !bytes.Equal(p.SenderHardwareAddr, ourMAC) ||
				!r.owners.Owned(p.SenderIP) || r.owners.Quiet(p.SenderIP) {
				t.Fatalf("bad reply %+v", p)
			}
		case !slices.Contains(dropReasons, reason):
			t.Fatalf("unknown reason %q", reason)
		case reply != nil:
			t.Fatal("dropped frame with a reply")
		}
		r.serveFrame(b)
		if n := outcomes(m, m.ARPReplies) - before; n != 1 {
			t.Fatalf("frame counted %v times", n)
		}
		if reason == "" {
			c.next(t)
		}
	})
}

func FuzzNDPHandle(f *testing.F) {
	for _, seed := range [][]byte{
		ns{}.bytes(),
		ns{dst: vip6, ethDst: ourMAC, noSLLA: true}.bytes(),
		ns{src: netip.IPv6Unspecified(), noSLLA: true}.bytes(),
		ns{target: vip6Other}.bytes(),
		ns{options: []byte{200, 0, 0, 0, 0, 0, 0, 0}}.bytes(),
		ns{hop: 1}.bytes(),
		ns{}.bytes()[:60],
		ns{target: vip6Quiet}.bytes(),
		adv{}.bytes(),
		adv{dst: peer6, ethDst: ourMAC, solicited: true}.bytes(),
		adv{target: vip6Quiet, noTLLA: true}.bytes(),
		adv{hop: 1}.bytes(),
		{},
	} {
		f.Add(seed)
	}
	r, c, m := newTestNDP(f)
	f.Fuzz(func(t *testing.T, b []byte) { checkNDP(t, r, c, m, b) })
}

// FuzzNDPMessage fuzzes the ICMPv6 message inside an otherwise valid frame with a
// correct checksum, so that the fuzzer reaches message and option parsing, which a
// random checksum almost never lets through.
func FuzzNDPMessage(f *testing.F) {
	f.Add(uint8(135), []byte(vip6.AsSlice()), []byte{1, 1, 2, 0, 0, 0, 0, 2}, false)
	f.Add(uint8(135), []byte(vip6.AsSlice()), []byte{}, true)
	f.Add(uint8(135), []byte(vip6.AsSlice()), []byte{1, 0}, false)
	f.Add(uint8(136), []byte(vip6.AsSlice()), []byte{2, 1, 2, 0, 0, 0, 0, 3}, false)
	f.Add(uint8(136), []byte(vip6Quiet.AsSlice()), []byte{}, true)
	r, c, m := newTestNDP(f)
	f.Fuzz(func(t *testing.T, typ uint8, target, options []byte, unicast bool) {
		body := make([]byte, 4, 4+len(target)+len(options))
		body = append(body, target...)
		body = append(body, options...)
		msg := append([]byte{typ, 0, 0, 0}, body...)
		dst, ethDst := netip.MustParseAddr("ff02::1:ff00:10"), net.HardwareAddr{0x33, 0x33, 0xff, 0, 0, 0x10}
		if unicast {
			dst, ethDst = vip6, ourMAC
		}
		binary.BigEndian.PutUint16(msg[2:4], icmpv6Checksum(peer6, dst, msg))
		checkNDP(t, r, c, m, ipv6Bytes(ethDst, peerMAC, peer6, dst, 58, 255, msg))
	})
}

func checkNDP(t *testing.T, r *NDPResponder, c *fakeConn, m *Metrics, b []byte) {
	before := outcomes(m, m.NDPAdvertisements)
	reply, dst, reason := r.handle(b)
	switch {
	case reason == "":
		got := parseNA(t, reply)
		if !bytes.Equal(got.ethSrc, ourMAC) || !bytes.Equal(got.tlla, ourMAC) || got.msg.Override ||
			!r.owners.Owned(got.msg.TargetAddress) || r.owners.Quiet(got.msg.TargetAddress) {
			t.Fatalf("bad reply %+v", got)
		}
		if !bytes.Equal(dst, got.ethDst) || (got.dst != allNodes && !unicastMAC(dst)) {
			t.Fatalf("reply to %s / %s", dst, got.dst)
		}
	case !slices.Contains(dropReasons, reason):
		t.Fatalf("unknown reason %q", reason)
	case reply != nil:
		t.Fatal("dropped frame with a reply")
	}
	r.serveFrame(b)
	if n := outcomes(m, m.NDPAdvertisements) - before; n != 1 {
		t.Fatalf("frame counted %v times", n)
	}
	if reason == "" {
		c.next(t)
	}
}

// outcomes is the number of frames counted so far: answered plus dropped.
func outcomes(m *Metrics, answered prometheus.Counter) float64 {
	n := value(answered)
	for _, why := range dropReasons {
		n += value(m.Dropped.WithLabelValues(why))
	}
	return n
}
