package iptables

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"herald.dev/herald/proxy/model"
)

func TestMasqueradeMark(t *testing.T) {
	for bit, want := range map[int]string{14: "0x00004000", 0: "0x00000001", 3: "0x00000008", 31: "0x80000000"} {
		n := testNode()
		n.MasqueradeBit = bit
		r, err := resolveNode(&n, model.IPv4)
		if err != nil {
			t.Fatalf("bit %d: %v", bit, err)
		}
		if r.mark != want {
			t.Errorf("bit %d: mark %s, want %s", bit, r.mark, want)
		}
	}
}

func TestInvalidNodeSettings(t *testing.T) {
	for name, tc := range map[string]struct {
		family model.Family
		edit   func(*Node)
	}{
		"family":           {model.Family(5), func(*Node) {}},
		"bit too large":    {model.IPv4, func(n *Node) { n.MasqueradeBit = 32 }},
		"negative bit":     {model.IPv4, func(n *Node) { n.MasqueradeBit = -1 }},
		"two detectors":    {model.IPv4, func(n *Node) { n.LocalDetector.BridgeInterface = "cbr0" }},
		"bridge name":      {model.IPv4, func(n *Node) { n.LocalDetector = model.LocalDetector{BridgeInterface: "br 0"} }},
		"long prefix":      {model.IPv4, func(n *Node) { n.LocalDetector = model.LocalDetector{InterfaceNamePrefix: "abcdefghijklmno"} }},
		"invalid pod CIDR": {model.IPv4, func(n *Node) { n.LocalDetector.PodCIDRs = []netip.Prefix{{}} }},
	} {
		n := testNode()
		tc.edit(&n)
		_, err := Generate(snapshot(tc.family, n), Options{})
		if !errors.Is(err, ErrInvalidNode) {
			t.Errorf("%s: err = %v, want ErrInvalidNode", name, err)
		}
	}
}

func TestLocalDetector(t *testing.T) {
	for name, tc := range map[string]struct {
		family              model.Family
		detector            model.LocalDetector
		ifLocal, ifNotLocal string
	}{
		"cidr of the family": {model.IPv6, model.LocalDetector{PodCIDRs: prefixes("10.0.0.0/8", "fd00:10::/64")}, "-s fd00:10::/64", "! -s fd00:10::/64"},
		"first of family":    {model.IPv4, model.LocalDetector{PodCIDRs: prefixes("10.1.0.0/16", "10.2.0.0/16")}, "-s 10.1.0.0/16", "! -s 10.1.0.0/16"},
		"host bits masked":   {model.IPv4, model.LocalDetector{PodCIDRs: prefixes("10.1.2.3/8")}, "-s 10.0.0.0/8", "! -s 10.0.0.0/8"},
		"no cidr of family":  {model.IPv4, model.LocalDetector{PodCIDRs: prefixes("fd00:10::/64")}, "", ""},
		"bridge":             {model.IPv4, model.LocalDetector{BridgeInterface: "cbr0"}, "-i cbr0", "! -i cbr0"},
		"prefix":             {model.IPv6, model.LocalDetector{InterfaceNamePrefix: "veth"}, "-i veth+", "! -i veth+"},
		"none":               {model.IPv4, model.LocalDetector{}, "", ""},
	} {
		n := testNode()
		n.LocalDetector = tc.detector
		r, err := resolveNode(&n, tc.family)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.ifLocal != tc.ifLocal || r.notLocal != tc.ifNotLocal {
			t.Errorf("%s: got %q / %q, want %q / %q", name, r.ifLocal, r.notLocal, tc.ifLocal, tc.ifNotLocal)
		}
	}
}

// TestNodePortAddresses follows proxyutil.NewNodePortAddresses and NewProxier: the
// family's CIDRs decide "all local addresses" and whether localhost NodePorts survive.
func TestNodePortAddresses(t *testing.T) {
	ifaces := addrs("127.0.0.1", "192.168.0.2", "10.1.2.3", "::1", "fd00::2")
	for name, tc := range map[string]struct {
		family        model.Family
		localhost     bool
		cidrs         []netip.Prefix
		wantLocalhost bool
		wantIPs       []netip.Addr // nil: all local addresses
	}{
		"default v4":              {model.IPv4, true, nil, true, nil},
		"default v4 no localhost": {model.IPv4, false, nil, false, nil},
		"default v6":              {model.IPv6, true, nil, false, nil},
		"only other family":       {model.IPv4, true, prefixes("fd00::/8"), true, nil},
		"zero cidr":               {model.IPv4, true, prefixes("192.168.0.0/16", "0.0.0.0/0"), true, nil},
		"restricted":              {model.IPv4, true, prefixes("192.168.0.0/16"), false, addrs("192.168.0.2")},
		"restricted + loopback":   {model.IPv4, true, prefixes("127.0.0.1/32", "10.0.0.0/8"), true, addrs("127.0.0.1", "10.1.2.3")},
		"restricted v6":           {model.IPv6, true, prefixes("::1/128", "fd00::/8"), false, addrs("::1", "fd00::2")},
		"no matching address":     {model.IPv4, false, prefixes("172.16.0.0/12"), false, []netip.Addr{}},
	} {
		n := testNode()
		n.LocalhostNodePorts, n.NodePortAddresses, n.InterfaceAddrs = tc.localhost, tc.cidrs, ifaces
		r, err := resolveNode(&n, tc.family)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.localhostNodePorts != tc.wantLocalhost {
			t.Errorf("%s: localhostNodePorts = %v", name, r.localhostNodePorts)
		}
		if (r.nodePortIPs == nil) != (tc.wantIPs == nil) || !slices.Equal(r.nodePortIPs, tc.wantIPs) {
			t.Errorf("%s: nodePortIPs = %v, want %v", name, r.nodePortIPs, tc.wantIPs)
		}
	}
}

// TestNodePortsJumpLoopback checks which loopback destinations survive: none for IPv6,
// and for IPv4 only with localhost NodePorts.
func TestNodePortsJumpLoopback(t *testing.T) {
	for _, tc := range []struct {
		family    model.Family
		localhost bool
		want      string
	}{
		{model.IPv4, true, "-d 127.0.0.1 -j KUBE-NODEPORTS\n"},
		{model.IPv4, false, ""},
		{model.IPv6, true, ""},
	} {
		n := testNode()
		n.LocalhostNodePorts = tc.localhost
		n.NodePortAddresses = prefixes("127.0.0.0/8", "::1/128")
		n.InterfaceAddrs = addrs("127.0.0.1", "::1")
		r, err := resolveNode(&n, tc.family)
		if err != nil {
			t.Fatal(err)
		}
		var out lines
		writeNodePortsJump(&out, r)
		got := string(out.buf)
		if tc.want == "" && got != "" || tc.want != "" && !containsSuffix(got, tc.want) {
			t.Errorf("%v localhost=%v: got %q", tc.family, tc.localhost, got)
		}
	}
}

func containsSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}
