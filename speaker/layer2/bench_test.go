package layer2

import (
	"net/netip"
	"testing"
)

// The per-packet cost matters because every ARP broadcast on the LAN reaches every
// node's responders; most of them ask for IPs the node does not own.

func BenchmarkARPHandleNotOwned(b *testing.B) {
	r, _, _ := newTestARP(b)
	frame := arpRequest(netip.MustParseAddr("192.0.2.99"))
	b.ReportAllocs()
	for b.Loop() {
		r.handle(frame)
	}
}

// BenchmarkARPHandleReplyNotOwned is the claim check on an ARP reply from an address
// this node does not own: one table lookup.
func BenchmarkARPHandleReplyNotOwned(b *testing.B) {
	r, _, _ := newTestARP(b)
	frame := arpBytes(ourMAC, peerMAC, 2, peerMAC, peer4, ourMAC, netip.MustParseAddr("192.0.2.99"))
	b.ReportAllocs()
	for b.Loop() {
		r.handle(frame)
	}
}

func BenchmarkARPHandleReply(b *testing.B) {
	r, _, _ := newTestARP(b)
	frame := arpRequest(vip4)
	b.ReportAllocs()
	for b.Loop() {
		r.handle(frame)
	}
}

func BenchmarkNDPHandleReply(b *testing.B) {
	r, _, _ := newTestNDP(b)
	frame := ns{}.bytes()
	b.ReportAllocs()
	for b.Loop() {
		r.handle(frame)
	}
}
