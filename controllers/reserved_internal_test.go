package controllers

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClusterReserved(t *testing.T) {
	nodes := []corev1.Node{{
		ObjectMeta: metav1.ObjectMeta{Name: "w1"},
		Spec:       corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:244:1::/64", "bogus"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "172.18.0.3"},
			{Type: corev1.NodeExternalIP, Address: "::ffff:203.0.113.7"},
			{Type: corev1.NodeHostName, Address: "w1"},
			{Type: corev1.NodeInternalDNS, Address: "w1.lan"},
			{Type: corev1.NodeInternalIP, Address: "not-an-ip"},
		}},
	}}
	cidrs := []networkingv1.ServiceCIDR{{Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12", "fd00:10:96::/108"}}}}
	flags := ClusterRanges{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.100.0.1/24")}}
	var got []string
	for _, r := range clusterReserved(nodes, cidrs, flags) {
		got = append(got, r.String())
	}
	want := []string{
		"10.244.0.0/16 (pod CIDR (--cluster-cidr))",
		"10.100.0.0/24 (Service CIDR (--service-cidr))",
		"10.96.0.0/12 (Service CIDR 10.96.0.0/12)",
		"fd00:10:96::/108 (Service CIDR fd00:10:96::/108)",
		"10.244.1.0/24 (pod CIDR of node w1)",
		"fd00:244:1::/64 (pod CIDR of node w1)",
		"172.18.0.3 (InternalIP of node w1)",
		"203.0.113.7 (ExternalIP of node w1)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("clusterReserved =\n%q\nwant\n%q", got, want)
	}
}
