package ipam

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestHoldings(t *testing.T) {
	a := New()
	a.SetPools([]Pool{mkPool(t, "default", []string{"10.0.0.0/24"}), mkPool(t, "other", []string{"10.0.1.0/24"})})
	for _, svc := range []Service{
		mkSvc("ns/b", requested("10.0.1.9")),
		mkSvc("ns/a", requested("10.0.0.5"), sharing("k")),
		mkSvc("ns/c", requested("10.0.0.5"), sharing("k"), ports("TCP/443")),
	} {
		if _, err := a.Allocate(svc); err != nil {
			t.Fatalf("allocate %s: %v", svc.Key, err)
		}
	}
	a.Release("ns/c")
	want := []Holding{
		{Key: "ns/a", Pool: "default", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.5")}},
		{Key: "ns/b", Pool: "other", IPs: []netip.Addr{netip.MustParseAddr("10.0.1.9")}},
	}
	if got := a.Holdings(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Holdings() = %+v, want %+v", got, want)
	}
}
