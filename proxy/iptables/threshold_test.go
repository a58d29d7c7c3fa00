package iptables

import (
	"bytes"
	"fmt"
	"testing"

	"herald.dev/herald/proxy/model"
)

// Comments on endpoint rules are dropped when the endpoints of all proxied service ports
// exceed 1000, counting every endpoint (ready or not) as kube-proxy does.
func TestLargeClusterThreshold(t *testing.T) {
	build := func(n int, threshold int) *Payload {
		var eps []model.Endpoint
		for i := 0; i < n; i++ {
			e := ready(fmt.Sprintf("10.1.%d.%d", i/256, i%256), "")
			e.Ready = i%2 == 0 // not-ready endpoints count too
			eps = append(eps, e)
		}
		node := testNode()
		node.LargeClusterEndpoints = threshold
		return mustGenerate(t, snapshot(model.IPv4, node, service("ns1", "big", "172.30.0.1", endpoints(eps...))), Options{})
	}
	const sepComment = "-m comment --comment ns1/big:p80 -s 10.1.0.0 -j KUBE-MARK-MASQ"
	for _, tc := range []struct {
		endpoints, threshold int
		large                bool
	}{
		{1000, 0, false}, {1001, 0, true}, {1001, 1000, true}, {5, 4, true}, {5, 5, false}, {1001, -1, false},
	} {
		p := build(tc.endpoints, tc.threshold)
		if p.LargeClusterMode != tc.large || p.TotalEndpoints != tc.endpoints {
			t.Errorf("%d endpoints, threshold %d: large=%v total=%d", tc.endpoints, tc.threshold, p.LargeClusterMode, p.TotalEndpoints)
		}
		if has := bytes.Contains(p.Bytes(), []byte(sepComment)); has == tc.large {
			t.Errorf("%d endpoints, threshold %d: endpoint comments present = %v", tc.endpoints, tc.threshold, has)
		}
		checkStructure(t, p, nil)
	}
}
