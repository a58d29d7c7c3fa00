package speaker

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/speaker/layer2"
)

func TestPeerMACsOutliveTheRecordForAWhile(t *testing.T) {
	now := time.Unix(1000, 0)
	p := peerMACs{now: func() time.Time { return now }}
	mac := func(s string) net.HardwareAddr {
		m, err := net.ParseMAC(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := mac("02:00:00:00:00:0a"), mac("02:00:00:00:00:0b")

	p.set("worker", []string{a.String()})
	p.set("worker2", []string{b.String()})
	for _, c := range []struct {
		self string
		mac  net.HardwareAddr
		want bool
	}{
		{"worker2", a, true},
		{"worker", a, false}, // its own MAC is no peer's
		{"worker", b, true},
		{"worker", mac("02:00:00:00:00:0c"), false},
	} {
		if got := p.has(c.self, c.mac); got != c.want {
			t.Errorf("has(%s, %s) = %v, want %v", c.self, c.mac, got, c.want)
		}
	}

	// worker's record is deleted (a graceful stop): its last frames still come from a
	// speaker, not from a foreign device.
	p.set("worker", nil)
	if !p.has("worker2", a) {
		t.Errorf("a deleted record's MAC stopped counting at once")
	}
	now = now.Add(peerMACRetention - time.Second)
	if !p.has("worker2", a) {
		t.Errorf("a deleted record's MAC stopped counting before %v", peerMACRetention)
	}
	now = now.Add(2 * time.Second)
	if p.has("worker2", a) {
		t.Errorf("a deleted record's MAC still counts after %v", peerMACRetention)
	}

	// A speaker back with a new MAC: the new one counts, the retention of the old
	// one ends with the new record.
	p.set("worker2", nil)
	p.set("worker2", []string{a.String()})
	if !p.has("worker", a) || p.has("worker", b) {
		t.Errorf("after worker2 came back with %s: has(%s)=%v has(%s)=%v, want true false", a, a, p.has("worker", a), b, p.has("worker", b))
	}
}

// A peer's MACs from its memberlist metadata count whether or not its record is
// watched, and give way to the ones it says next.
func TestPeerMACsFromMemberlistMeta(t *testing.T) {
	var p peerMACs
	a, b := mustMAC(t, "02:00:00:00:00:0a"), mustMAC(t, "02:00:00:00:00:0b")
	p.setMeta("node-1", []byte("02:00:00:00:00:0a"))
	if !p.has("node-2", a) {
		t.Error("a MAC node-1's metadata says is not a peer's")
	}
	if p.has("node-1", a) {
		t.Error("node-1's own MAC counts as a peer's for node-1")
	}
	p.setMeta("node-1", []byte("02:00:00:00:00:0b"))
	if p.has("node-2", a) || !p.has("node-2", b) {
		t.Errorf("after new metadata: has(old) %v, has(new) %v; want false, true", p.has("node-2", a), p.has("node-2", b))
	}
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConflictNoteSaysWhatTheNodeDoes: the VIPStatus note follows the conflict: quiet,
// never announced, or answered again, contested.
func TestConflictNoteSaysWhatTheNodeDoes(t *testing.T) {
	c := layer2.Conflict{IP: netip.MustParseAddr("192.0.2.10"), Interface: "eth0", MAC: mustMAC(t, "02:00:00:00:00:0a")}
	for _, tc := range []struct {
		change func(*layer2.Conflict)
		want   string
	}{
		{func(*layer2.Conflict) {}, "node1 stopped answering for it"},
		{func(c *layer2.Conflict) { c.BeforeAnnounce = true }, "node1 found it in use before announcing it"},
		{func(c *layer2.Conflict) { c.BeforeAnnounce, c.Contested = true, time.Unix(1, 0) }, "node1 answers for it again, contested"},
	} {
		cc := c
		tc.change(&cc)
		if got := conflictNote("node1", cc); !strings.Contains(got, tc.want) {
			t.Errorf("note %q, want it to say %q", got, tc.want)
		}
	}
}
