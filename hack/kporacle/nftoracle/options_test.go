//go:build linux

package nftoracle

import (
	"net"
	"strings"
	"testing"
)

func TestOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.NodeName = "" }, "NodeName is required"},
		{func(o *Options) { o.NodeIP = nil }, "NodeIP"},
		{func(o *Options) { o.MasqueradeBit = 32 }, "MasqueradeBit 32"},
		{func(o *Options) { o.ClusterCIDRs = []string{"10.0.0.0"} }, "ClusterCIDRs"},
		{func(o *Options) { o.ServiceCIDRs = []string{"nope"} }, "ServiceCIDRs"},
		{func(o *Options) { o.InterfaceAddrs = []net.IP{{1, 2, 3}} }, "InterfaceAddrs"},
	} {
		opts := testOptions()
		tc.change(&opts)
		if _, err := New(opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New error = %v, want one mentioning %q", err, tc.want)
		}
	}
}

// Options that change rules reach the proxier.
func TestOptionsReachTheProxier(t *testing.T) {
	opts := testOptions()
	opts.MasqueradeBit = 5
	opts.MasqueradeAll = true
	opts.NodePortAddresses = []string{"192.168.0.0/24"}
	opts.InterfaceAddrs = []net.IP{testNodeIP, net.ParseIP("192.168.0.3"), net.ParseIP("10.1.1.1")}
	o, _ := newWorld(t, opts)
	dump, err := o.Dump()
	if err != nil {
		t.Fatal(err)
	}
	requireLines(t, "Dump", dump,
		`add rule ip kube-proxy masquerading mark and 0x00000020 != 0 mark set mark xor 0x00000020 masquerade fully-random`,
		`add rule ip kube-proxy services ip daddr @cluster-ips mark set mark or 0x00000020 comment "masquerade all clusterIP traffic"`,
		// NodePortAddresses: the interface addresses inside 192.168.0.0/24
		`add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports`,
		`add element ip kube-proxy nodeport-ips { 192.168.0.2 }`,
		`add element ip kube-proxy nodeport-ips { 192.168.0.3 }`,
	)
	refuse(t, "Dump", dump, "10.1.1.1", "fib daddr type local")
}
