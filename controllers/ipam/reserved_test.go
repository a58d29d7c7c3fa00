package ipam

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"go4.org/netipx"
)

func reserve(from, to, why string) Reserved {
	return Reserved{Range: netipx.IPRangeFrom(netip.MustParseAddr(from), netip.MustParseAddr(to)), Why: why}
}

func allocIPs(t *testing.T, a *Allocator, keys ...string) []string {
	t.Helper()
	var out []string
	for _, k := range keys {
		res, err := a.Allocate(mkSvc(k))
		if err != nil {
			out = append(out, "error")
			continue
		}
		out = append(out, addrStrings(res.IPs)...)
		checkInvariants(t, a)
	}
	return out
}

// Addresses the cluster or the network uses are given to no Service: automatic picks
// skip them, requests for them fail naming the use, they are not in the pool's
// capacity, and a Service that held one before keeps it.
func TestReservedAddresses(t *testing.T) {
	a := New()
	a.SetPools([]Pool{mkPool(t, "lan", []string{"10.0.0.0/29"})})
	// Held before the reservation is known (a Service from before an upgrade).
	if _, err := a.Allocate(mkSvc("ns/early", requested("10.0.0.1"))); err != nil {
		t.Fatal(err)
	}
	if !a.SetReserved([]Reserved{reserve("10.0.0.1", "10.0.0.1", "InternalIP of node w1"), reserve("10.0.0.4", "10.0.0.5", "Service CIDR 10.0.0.4/31")}) {
		t.Fatal("SetReserved reported no change")
	}
	if a.SetReserved([]Reserved{reserve("10.0.0.4", "10.0.0.5", "Service CIDR 10.0.0.4/31"), reserve("10.0.0.1", "10.0.0.1", "InternalIP of node w1")}) {
		t.Fatal("the same reservations again reported a change")
	}
	checkInvariants(t, a)
	if got, want := a.Stats("lan"), (PoolStats{AssignedIPv4: 1, AvailableIPv4: 5}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	if got := allocIPs(t, a, "ns/a", "ns/b", "ns/c", "ns/d", "ns/e", "ns/f"); !slices.Equal(got, []string{"10.0.0.0", "10.0.0.2", "10.0.0.3", "10.0.0.6", "10.0.0.7", "error"}) {
		t.Errorf("allocated %v", got)
	}
	_, err := a.Allocate(mkSvc("ns/r", requested("10.0.0.5")))
	if !errors.Is(err, ErrNoUsablePool) || !strings.Contains(err.Error(), "requested IP 10.0.0.5 is reserved: Service CIDR 10.0.0.4/31") {
		t.Errorf("request for a reserved address: %v", err)
	}
	// The holder keeps its reserved address, also when it asks for it again.
	if res, err := a.Allocate(mkSvc("ns/early", requested("10.0.0.1"))); err != nil || addrStrings(res.IPs)[0] != "10.0.0.1" {
		t.Errorf("holder of a reserved address: %v %v", res, err)
	}
	var uses []string
	for _, r := range a.ReservedIn("lan") {
		uses = append(uses, r.String())
	}
	if want := []string{"10.0.0.1 (InternalIP of node w1)", "10.0.0.4/31 (Service CIDR 10.0.0.4/31)"}; !slices.Equal(uses, want) {
		t.Errorf("ReservedIn = %q, want %q", uses, want)
	}
	// Released, the reserved address does not go back to the pool.
	a.Release("ns/early")
	checkInvariants(t, a)
	if got := allocIPs(t, a, "ns/g"); got[0] != "error" {
		t.Errorf("after the holder left, got %v", got)
	}
	// The node goes away: its address is free again.
	a.SetReserved([]Reserved{reserve("10.0.0.4", "10.0.0.5", "Service CIDR 10.0.0.4/31")})
	checkInvariants(t, a)
	if got := allocIPs(t, a, "ns/h"); got[0] != "10.0.0.1" {
		t.Errorf("after the node left, got %v", got)
	}
}

// The special-purpose addresses are reserved in every allocator.
func TestSpecialPurposeAddresses(t *testing.T) {
	a := New()
	a.SetPools([]Pool{
		mkPool(t, "loop", []string{"127.0.0.1/32"}),
		mkPool(t, "edge", []string{"169.254.169.253-169.254.169.255", "223.255.255.255-224.0.0.1"}),
		mkPool(t, "v6", []string{"fe80::/127", "::/127"}),
	})
	checkInvariants(t, a)
	if got := allocIPs(t, a, "ns/a", "ns/b"); !slices.Equal(got, []string{"223.255.255.255", "error"}) {
		t.Errorf("allocated %v", got)
	}
	for pool, want := range map[string]PoolStats{"loop": {}, "edge": {AssignedIPv4: 1}, "v6": {}} {
		if got := a.Stats(pool); got != want {
			t.Errorf("Stats(%s) = %+v, want %+v", pool, got, want)
		}
	}
	var whys []string
	for _, r := range a.ReservedIn("edge") {
		whys = append(whys, r.String())
	}
	if want := []string{"169.254.169.253-169.254.169.255 (link-local)", "224.0.0.0/31 (multicast)"}; !slices.Equal(whys, want) {
		t.Errorf("ReservedIn(edge) = %q, want %q", whys, want)
	}
	if got := len(a.ReservedIn("v6")); got != 3 {
		t.Errorf("ReservedIn(v6) = %v, want ::, ::1 and fe80::/127", a.ReservedIn("v6"))
	}
}
