package ipam

import (
	"net/netip"
	"testing"
)

func TestPoolIndex(t *testing.T) {
	ix := NewPoolIndex([]Pool{
		mkPool(t, "a", []string{"10.0.0.0/28", "fd00::/124"}),
		mkPool(t, "b", []string{"10.0.1.0-10.0.1.9"}, terminating),
		// Younger than a and overlapping it: disabled, so a keeps 10.0.0.8-15.
		mkPool(t, "late", []string{"10.0.0.8/29", "10.0.2.0/30"}, createdAt(1)),
		// Its own entries collide: disabled, but still the only pool of 10.0.3.x.
		mkPool(t, "self", []string{"10.0.3.0/30", "10.0.3.2/31"}),
	})
	for ip, want := range map[string]string{
		"10.0.0.1":           "a",
		"10.0.0.9":           "a", // in late too, which lost the overlap
		"::ffff:10.0.0.2":    "a", // IPv4-mapped: the same address
		"fd00::5":            "a",
		"10.0.1.9":           "b", // terminating pools still hold their addresses
		"10.0.1.10":          "",
		"10.0.2.1":           "late",
		"10.0.3.1":           "self",
		"192.168.0.1":        "",
		"fd00::10":           "",
		"10.0.0.16":          "",
		"2001:db8::10.0.0.1": "",
	} {
		if got := ix.PoolOf(netip.MustParseAddr(ip)); got != want {
			t.Errorf("PoolOf(%s) = %q, want %q", ip, got, want)
		}
	}
}

// The index names the pool the allocator counts an address in, for every address the
// allocator gives out.
func TestPoolIndexAgreesWithAllocator(t *testing.T) {
	pools := []Pool{
		mkPool(t, "a", []string{"10.0.0.0/29"}),
		mkPool(t, "late", []string{"10.0.0.4/30", "10.0.0.8/30"}, createdAt(1)),
		mkPool(t, "c", []string{"10.0.1.0/30"}, createdAt(2)),
	}
	a := New()
	a.SetPools(pools)
	ix := NewPoolIndex(pools)
	for i := range 12 {
		svc := Service{Key: "ns/s" + string(rune('a'+i)), Namespace: "ns", Families: []Family{IPv4}}
		res, err := a.Allocate(svc)
		if err != nil {
			continue // the enabled pools ran out
		}
		if got := ix.PoolOf(res.IPs[0]); got != res.Pool {
			t.Errorf("%s: %s from pool %q, index says %q", svc.Key, res.IPs[0], res.Pool, got)
		}
	}
}
