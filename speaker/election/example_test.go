package election_test

import (
	"fmt"
	"net/netip"

	"herald.dev/herald/speaker/election"
)

// A kind cluster: the control-plane node carries the exclude label, the workers announce.
// Each speaker runs Elect on the same view and announces the IPs whose Owner is itself.
func ExampleElect() {
	ready := true
	v := election.View{
		Members: []string{"kind-control-plane", "kind-worker", "kind-worker2"},
		Nodes: []election.Node{
			{Name: "kind-control-plane", Labels: map[string]string{election.ExcludeLabel: ""}},
			{Name: "kind-worker"},
			{Name: "kind-worker2"},
		},
		Advertisements: []election.Advertisement{{Name: "l2", AllPools: true}},
	}
	services := []election.Service{{
		Key:       "default/web",
		IPs:       []netip.Addr{netip.MustParseAddr("172.18.255.200")},
		Pool:      "kind",
		Local:     true,
		Endpoints: []election.Endpoint{{Node: "kind-worker2", Ready: &ready}},
	}, {
		Key:  "default/db", // its pods are still starting
		IPs:  []netip.Addr{netip.MustParseAddr("172.18.255.201")},
		Pool: "kind",
	}}
	for _, d := range election.Elect(v, services) {
		if d.Owner != "" {
			fmt.Printf("%s: %s announces, candidates %v\n", d.IP, d.Owner, d.Candidates)
		} else {
			fmt.Printf("%s: %s\n", d.IP, d.Message)
		}
	}
	// Output:
	// 172.18.255.200: kind-worker2 announces, candidates [kind-worker2]
	// 172.18.255.201: not announcing 172.18.255.201: Service default/db has no ready or serving endpoint
}
