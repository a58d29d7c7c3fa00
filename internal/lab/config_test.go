package lab

import "testing"

// The dual-stack lab numbers its hosts and pod CIDRs alike in both families, as kind
// does, and the IPv6 ones lie in the lab's IPv6 subnet and cluster CIDR.
func TestDualStackAddressing(t *testing.T) {
	for i, want := range []struct{ addr, addr6, cidr, cidr6 string }{
		{"172.18.0.3", "fc00:f853:ccd:e793::3", "10.244.1.0/24", "fd00:10:244:1::/64"},
		{"172.18.0.5", "fc00:f853:ccd:e793::5", "10.244.3.0/24", "fd00:10:244:3::/64"},
	} {
		n := i * 2
		if got := workerAddr(n).String() + " " + workerAddr6(n).String() + " " + podCIDR(n).String() + " " + podCIDR6(n).String(); got != want.addr+" "+want.addr6+" "+want.cidr+" "+want.cidr6 {
			t.Errorf("worker %d: %s; want %v", n, got, want)
		}
		if !Subnet6.Contains(workerAddr6(n)) || !ClusterCIDR6.Contains(podCIDR6(n).Addr()) {
			t.Errorf("worker %d: %s or %s outside %s, %s", n, workerAddr6(n), podCIDR6(n), Subnet6, ClusterCIDR6)
		}
	}
	if !Subnet6.Contains(cpAddr6) || !Subnet6.Contains(clientAddr6) || workerAddr6(MaxWorkers-1).Compare(clientAddr6) >= 0 {
		t.Errorf("control plane %s, client %s, last worker %s: want all in %s, workers below the client", cpAddr6, clientAddr6, workerAddr6(MaxWorkers-1), Subnet6)
	}
	single, dual := proxierArgs(&State{}), proxierArgs(&State{DualStack: true, Proxy: "nftables"})
	if single[0] != "--cluster-cidr=10.244.0.0/16" || dual[0] != "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56" ||
		single[1] != "--proxy=iptables" || dual[1] != "--proxy=nftables" {
		t.Errorf("proxier flags %v (IPv4-only), %v (dual-stack, nftables)", single, dual)
	}
}
