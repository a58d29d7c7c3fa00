package speaker

import (
	"net/netip"
	"slices"
	"testing"

	"herald.dev/herald/speaker/election"
)

func TestCounterIPs(t *testing.T) {
	ip := netip.MustParseAddr
	decisions := []election.Decision{
		{IP: ip("10.0.0.1"), Owner: "a", Candidates: []string{"a", "b", "c"}},
		{IP: ip("10.0.0.2"), Owner: "b", Candidates: []string{"b", "a"}},
		{IP: ip("10.0.0.3"), Owner: "b", Candidates: []string{"b", "c", "a"}},
		{IP: ip("10.0.0.4"), Reason: election.ReasonNoEndpoints},
		{IP: ip("10.0.0.5"), Owner: "a", Candidates: []string{"a"}},
	}
	for node, want := range map[string][]string{
		"a": {"10.0.0.1", "10.0.0.2", "10.0.0.5"},
		"b": {"10.0.0.1", "10.0.0.2", "10.0.0.3"},
		"c": {"10.0.0.3"},
		"d": nil,
	} {
		var got []string
		for _, a := range counterIPs(decisions, node) {
			got = append(got, a.String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("counterIPs(%s) = %v, want %v", node, got, want)
		}
	}
	had := map[netip.Addr]bool{ip("10.0.0.1"): true, ip("10.0.0.9"): true, ip("10.0.0.8"): true}
	if got, want := goneIPs(had, decisions), []netip.Addr{ip("10.0.0.8"), ip("10.0.0.9")}; !slices.Equal(got, want) {
		t.Errorf("goneIPs = %v, want %v", got, want)
	}
}
