package nftables

import (
	"slices"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/proxy/model"
	"sigs.k8s.io/knftables"
)

// The cascade takes endpoint i of n with probability 1/(n-i) when reached, the last
// always: every endpoint gets 1/n.
func TestPolicyChainCascade(t *testing.T) {
	svc := lbService("ns1", "web", "172.30.0.41", "1.2.3.4", 0,
		[2]string{"10.0.0.1", "node-a"}, [2]string{"10.0.0.2", "node-b"}, [2]string{"10.0.0.3", "node-b"})
	sticky := svc
	sticky.Name, sticky.SessionAffinityClientIP = "sticky", true

	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	snap := &Snapshot{Family: model.IPv4, Node: testNode(), Services: []model.Service{svc, sticky}}
	syncFake(t, fake, NewTable(), snap, nil, time.Unix(0, 0))

	rules := func(chain string) []string {
		rs, err := fake.ListRules(t.Context(), chain)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.Rule)
		}
		return out
	}
	if got, want := rules("service-"+portNameBase("ns1", "web", "tcp", "http")), []string{
		"numgen random mod 3 0 meta l4proto tcp dnat to 10.0.0.1:8080",
		"numgen random mod 2 0 meta l4proto tcp dnat to 10.0.0.2:8080",
		"meta l4proto tcp dnat to 10.0.0.3:8080",
	}; !slices.Equal(got, want) {
		t.Errorf("cascade:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	got := rules("service-" + portNameBase("ns1", "sticky", "tcp", "http"))
	if len(got) != 6 {
		t.Fatalf("affinity chain has %d rules, want 3 affinity checks and 3 cascade jumps:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, prefix := range []string{"ip saddr @affinity-", "ip saddr @affinity-", "ip saddr @affinity-",
		"numgen random mod 3 0 goto endpoint-", "numgen random mod 2 0 goto endpoint-", "goto endpoint-"} {
		if !strings.HasPrefix(got[i], prefix) {
			t.Errorf("affinity rule %d %q, want it to start with %q", i, got[i], prefix)
		}
	}
}
