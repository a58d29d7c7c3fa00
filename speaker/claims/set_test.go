package claims

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/election"
)

func TestClaimsRoundTrip(t *testing.T) {
	c := Set{
		netip.MustParseAddr("172.18.255.201"): {},
		netip.MustParseAddr("172.18.255.200"): {Token: "2026-11-25T10:00:00Z", Over: []string{"worker"}},
		netip.MustParseAddr("fc00::1"):        {Token: "a,b"},
	}
	raw := c.Encode()
	if want := `{"172.18.255.200":{"t":"2026-11-25T10:00:00Z","o":["worker"]},"172.18.255.201":{},"fc00::1":{"t":"a,b"}}`; string(raw) != want {
		t.Errorf("Encode = %s, want %s", raw, want)
	}
	got, err := Decode(raw)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("Decode = %v, %v; want %v", got, err, c)
	}
	for _, bad := range []string{`{"not-an-ip":{}}`, `[1,2]`, `{"10.0.0.1":{"o":"x"}}`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	if got, err := Decode(nil); err != nil || len(got) != 0 {
		t.Errorf("no claims: %v, %v", got, err)
	}
}

func claimService(name, rebalance string, ips ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if rebalance != "" {
		s.Annotations = map[string]string{heraldv1.AnnotationRebalance: rebalance}
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func TestIncumbentsFromClaims(t *testing.T) {
	ip1, ip2, ip3 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	tokens := Tokens([]*corev1.Service{
		claimService("a", "", "10.0.0.1"),
		claimService("b", "t2", "10.0.0.2"),
		claimService("c", "t3", "10.0.0.3"),
		claimService("d", "t1", "10.0.0.3"), // shares 10.0.0.3
	})
	if want := map[netip.Addr]string{ip1: "", ip2: "t2", ip3: "t1,t3"}; !reflect.DeepEqual(tokens, want) {
		t.Fatalf("tokens = %v, want %v", tokens, want)
	}
	claims := map[string]Set{
		"w1": {ip1: {Over: []string{"w0"}}, ip2: {Token: "t-old"}}, // ip2: claimed before the rebalance
		"w2": {ip2: {Token: "t2"}, ip3: {Token: "t1,t3"}},
		"w3": {ip3: {Token: "t1,t3"}, netip.MustParseAddr("10.0.0.9"): {}}, // ip3: a move under way; 10.0.0.9: gone
	}
	want := map[netip.Addr]election.Incumbent{ip1: {Node: "w1", Over: []string{"w0"}}, ip2: {Node: "w2"}}
	if got := Incumbents(claims, tokens); !reflect.DeepEqual(got, want) {
		t.Errorf("incumbents = %v, want %v", got, want)
	}
	// w2 stands in for w3 on ip3 (it took ip3 while w3 was away) and w3 claims it
	// again: w2 keeps it, on every speaker.
	claims["w2"][ip3] = Claim{Token: "t1,t3", Over: []string{"w3"}}
	want[ip3] = election.Incumbent{Node: "w2", Over: []string{"w3"}}
	if got := Incumbents(claims, tokens); !reflect.DeepEqual(got, want) {
		t.Errorf("incumbents = %v, want %v", got, want)
	}
	// Later, w2 froze; w3, first in the hash for ip3, took it back (Gen 2, standing in
	// for nobody). w2 comes back with its old claim, which still says it stands in for
	// w3: the latest taker keeps it, on every speaker.
	claims["w2"][ip3] = Claim{Token: "t1,t3", Over: []string{"w3"}, Gen: 1}
	claims["w3"][ip3] = Claim{Token: "t1,t3", Gen: 2}
	want[ip3] = election.Incumbent{Node: "w3"}
	if got := Incumbents(claims, tokens); !reflect.DeepEqual(got, want) {
		t.Errorf("after w2's stall: incumbents = %v, want %v", got, want)
	}
	// Two claims of one Gen (both sides took it apart): the rule on Over decides.
	claims["w2"][ip3] = Claim{Token: "t1,t3", Over: []string{"w3"}, Gen: 2}
	want[ip3] = election.Incumbent{Node: "w2", Over: []string{"w3"}}
	if got := Incumbents(claims, tokens); !reflect.DeepEqual(got, want) {
		t.Errorf("one Gen: incumbents = %v, want %v", got, want)
	}
}

func TestClaimGenRoundTrip(t *testing.T) {
	c := Set{netip.MustParseAddr("10.0.0.1"): {Token: "t", Over: []string{"w1"}, Gen: 7}}
	got, err := Decode(c.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("decoded %v, want %v", got, c)
	}
	// A claim of a speaker that writes no Gen reads as 0.
	old, err := Decode([]byte(`{"10.0.0.1":{"t":"t"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if g := old[netip.MustParseAddr("10.0.0.1")].Gen; g != 0 {
		t.Errorf("Gen of an old claim = %d, want 0", g)
	}
}

func TestClaimGens(t *testing.T) {
	ip1, ip2 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	live := map[string]Set{"w1": {ip1: {Gen: 2}}, "w2": {ip1: {Gen: 1}, ip2: {}}}
	lost := map[string]Set{"w3": {ip1: {Gen: 5}}}
	got := Gens(live, lost)
	if want := map[netip.Addr]uint64{ip1: 5}; !reflect.DeepEqual(got, want) || got[ip2] != 0 {
		t.Errorf("claimGens = %v, want %v: the highest of live and lost claims", got, want)
	}
	if got := Gens(nil, nil); len(got) != 0 {
		t.Errorf("claimGens of nothing = %v", got)
	}
}
