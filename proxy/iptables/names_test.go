package iptables

import (
	"testing"
)

// Hashes verified against kube-proxy's own test fixtures (pkg/proxy/iptables).
func TestChainNames(t *testing.T) {
	for _, tc := range []struct{ port, protocol, endpoint, want string }{
		{"ns1/svc1:p80", "tcp", "", "XPGD46QRK7WJZT7O"},
		{"ns2/svc2:p80", "tcp", "", "GNZBNJ2PO5MGZ6GT"},
		{"ns4/svc4:p80", "tcp", "", "4SW47YFZTEDKD3PK"},
		{"ns5/svc5:p80", "tcp", "", "NUKIZ6OKUXPJNT4C"},
		{"ns1/svc1:p80", "tcp", "10.180.0.1:80", "SXIVWICOYRO3J4NJ"},
		{"ns5/svc5:p80", "tcp", "10.180.0.3:80", "I77PXRDZVX7PMWMN"},
	} {
		if tc.endpoint == "" {
			c := newPortChains(tc.port, tc.protocol)
			want := portChains{"KUBE-SVC-" + tc.want, "KUBE-SVL-" + tc.want, "KUBE-FW-" + tc.want, "KUBE-EXT-" + tc.want}
			if c != want {
				t.Errorf("newPortChains(%q, %q) = %+v, want %+v", tc.port, tc.protocol, c, want)
			}
			continue
		}
		if got := endpointChain(tc.port, tc.protocol, tc.endpoint); got != "KUBE-SEP-"+tc.want {
			t.Errorf("endpointChain(%q, %q, %q) = %s, want KUBE-SEP-%s", tc.port, tc.protocol, tc.endpoint, got, tc.want)
		}
	}
}

func TestIsServiceChain(t *testing.T) {
	for chain, want := range map[string]bool{
		"KUBE-SVC-XPGD46QRK7WJZT7O": true, "KUBE-SVL-X": true, "KUBE-SEP-X": true, "KUBE-FW-X": true, "KUBE-EXT-X": true,
		"KUBE-SERVICES": false, "KUBE-NODEPORTS": false, "KUBE-MARK-MASQ": false, "KUBE-XLB-X": false, "CNI-X": false,
	} {
		if got := IsServiceChain(chain); got != want {
			t.Errorf("IsServiceChain(%q) = %v", chain, got)
		}
	}
}
