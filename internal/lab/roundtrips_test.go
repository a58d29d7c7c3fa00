package lab_test

import (
	"net/netip"
	"testing"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
)

// TestRoundTrips: a host resolves another's IPv4 address by ARP and its IPv6 address by
// NDP, answered by that host's kernel; a MAC that never answers is an error, not a rate.
func TestRoundTrips(t *testing.T) {
	l := labtest.NewNet(t, "hrt-", netip.MustParsePrefix("172.31.9.0/24"))
	if err := l.AddSubnet(netip.MustParsePrefix("fc00:9::/64")); err != nil {
		t.Fatal(err)
	}
	asker := labtest.AddHost(t, l, "a", netip.MustParseAddr("172.31.9.2"))
	target := labtest.AddHost(t, l, "b", netip.MustParseAddr("172.31.9.3"))
	for _, h := range []struct {
		host interface{ AddAddr(netip.Addr) error }
		addr string
	}{{asker, "fc00:9::2"}, {target, "fc00:9::3"}} {
		if err := h.host.AddAddr(netip.MustParseAddr(h.addr)); err != nil {
			t.Fatal(err)
		}
	}
	for _, ip := range []netip.Addr{netip.MustParseAddr("172.31.9.3"), netip.MustParseAddr("fc00:9::3")} {
		rate, err := lab.RoundTrips(asker.Namespace(), ip, target.MAC().String(), 50)
		if err != nil || rate <= 0 {
			t.Errorf("%s: %.0f round trips/s, %v; want answers from %s", ip, rate, err, target.MAC())
		}
		if _, err := lab.RoundTrips(asker.Namespace(), ip, "02:00:00:00:00:99", 1); err == nil {
			t.Errorf("%s: answered by 02:00:00:00:00:99, which no host has", ip)
		}
	}
}
