package layer2

import (
	"net"
	"testing"
	"time"
)

// TestReplyLimit: each requester has its own bucket of burst answers refilled at
// rate; past the map's size, new requesters share one bucket.
func TestReplyLimit(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newReplyLimit(10, 5, 2)
	a, b, c, d := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 3}, net.HardwareAddr{2, 0, 0, 0, 0, 4}
	count := func(mac net.HardwareAddr, n int, at time.Time) int {
		ok := 0
		for range n {
			if l.allow(mac, at) {
				ok++
			}
		}
		return ok
	}
	if got := count(a, 100, t0); got != 5 {
		t.Fatalf("a at once: %d answers, want the burst 5", got)
	}
	if got := count(b, 3, t0); got != 3 {
		t.Fatalf("b: %d answers, want 3: a's flood must not cost b", got)
	}
	if got := count(a, 100, t0.Add(200*time.Millisecond)); got != 2 {
		t.Fatalf("a after 200 ms: %d answers, want 2 (10/s)", got)
	}
	// The map holds a and b: c and d share one bucket.
	if got := count(c, 4, t0); got != 4 {
		t.Fatalf("c: %d answers, want 4 from the shared bucket", got)
	}
	if got := count(d, 4, t0); got != 1 {
		t.Fatalf("d: %d answers, want the shared bucket's last 1", got)
	}
	if len(l.buckets) != 2 {
		t.Fatalf("%d buckets, want at most 2", len(l.buckets))
	}
	// Once a and b have refilled they are pruned, and c gets a bucket of its own.
	if got := count(c, 100, t0.Add(time.Minute)); got != 5 {
		t.Fatalf("c a minute later: %d answers, want its own burst 5", got)
	}
	if l.allow(net.HardwareAddr{1, 2, 3}, t0) {
		t.Fatal("a MAC of 3 bytes was allowed")
	}
}

// TestARPRateLimit: answers to one requester stop at the burst and are counted; another
// requester is still answered; gratuitous ARP is never limited.
func TestARPRateLimit(t *testing.T) {
	clk := newFakeClock()
	const burst = 20
	r, c, m := newTestARP(t, withClock(clk), WithReplyLimit(50, burst))
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() { // the answers themselves are TestARPRules'; only their count matters
		for {
			select {
			case <-c.out:
			case <-done:
				return
			}
		}
	}()
	for range burst + 7 {
		r.serveFrame(arpRequest(vip4))
	}
	if got := value(m.ARPReplies); got != burst {
		t.Fatalf("arp_replies_total = %v, want %d", got, burst)
	}
	if got := value(m.RepliesRateLimited); got != 7 {
		t.Fatalf("replies_rate_limited_total = %v, want 7", got)
	}
	r.serveFrame(arpBytes(bcast, otherMAC, 1, otherMAC, peer4, make(net.HardwareAddr, 6), vip4))
	if got := value(m.ARPReplies); got != burst+1 {
		t.Fatalf("another requester was not answered: arp_replies_total = %v", got)
	}
	clk.Advance(time.Second)
	r.serveFrame(arpRequest(vip4))
	if got := value(m.ARPReplies); got != burst+2 {
		t.Fatalf("the first requester was not answered a second later: arp_replies_total = %v", got)
	}
	for range burst + 1 {
		if err := r.Announce(vip4); err != nil {
			t.Fatal(err)
		}
	}
	if got := value(m.GratuitousSent); got != 2*(burst+1) {
		t.Fatalf("gratuitous_sent_total = %v, want %d", got, 2*(burst+1))
	}
}
