//go:build linux

package nftoracle

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// benchObjects are the Services of herald's proxier benchmarks (proxy/bench_test.go):
// n LoadBalancer Services (ClusterIP, NodePort, one VIP), each with one EndpointSlice
// of ten endpoints, two of them on this node.
func benchObjects(n int) ([]*v1.Service, []*discoveryv1.EndpointSlice) {
	svcs := make([]*v1.Service, n)
	slices := make([]*discoveryv1.EndpointSlice, n)
	for i := range n {
		hi, lo := i>>8, i&255
		ns, name := fmt.Sprintf("ns%d", i%100), fmt.Sprintf("svc%d", i)
		svcs[i] = &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ClusterIP: fmt.Sprintf("10.96.%d.%d", hi, lo),
				ClusterIPs: []string{fmt.Sprintf("10.96.%d.%d", hi, lo)},
				Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: int32(30000 + i%2768)}}},
			Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: fmt.Sprintf("198.18.%d.%d", hi, lo)}}}},
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		}
		for e := range 10 {
			node := "other"
			if e < 2 {
				node = benchNode
			}
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 100+e, hi, lo)}, NodeName: ptr.To(node),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			})
		}
		slices[i] = slice
	}
	return svcs, slices
}

const benchNode = "node"

// benchNamespace creates a network namespace for one benchmark and removes it after.
func benchNamespace(b *testing.B) string {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Fatal("the benchmark needs root to create a network namespace and program nftables in it")
	}
	ns := fmt.Sprintf("hkob-%d", os.Getpid())
	_ = exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		b.Fatalf("ip netns add %s: %v\n%s", ns, err, out)
	}
	b.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	return ns
}

// BenchmarkKubeProxyNFTables runs kube-proxy v1.36.3's nftables proxier against the
// real nft in a network namespace, with the Services of herald's BenchmarkSyncFull
// and BenchmarkSyncOneEndpointChanged, so that the figures sit side by side. The
// oracle's recorder keeps each transaction's text, a small cost kube-proxy does not
// have. cold is the first sync into an empty namespace; full a forced full resync
// over the existing table; one-endpoint a partial sync after one endpoint changed.
func BenchmarkKubeProxyNFTables(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, kind := range []string{"cold", "full", "one-endpoint"} {
			b.Run(fmt.Sprintf("services=%d/%s", n, kind), func(b *testing.B) {
				ns := benchNamespace(b)
				svcs, slices := benchObjects(n)
				err := InNetNS(ns, func() error {
					nft, err := knftables.New(knftables.IPv4Family, TableName)
					if err != nil {
						return err
					}
					o, err := New(Options{NodeName: benchNode, NodeIP: net.ParseIP("172.31.0.3"),
						ClusterCIDRs: []string{"172.31.0.64/26"}, NFT: nft})
					if err != nil {
						return err
					}
					Populate(o, svcs, slices)
					if kind == "cold" {
						b.ResetTimer()
					}
					if _, err := o.Sync(); err != nil {
						return err
					}
					if kind == "cold" {
						b.StopTimer()
						for i := 1; i < b.N; i++ {
							// Every cold start needs an empty namespace: one per run.
							return fmt.Errorf("cold: run with -benchtime=1x")
						}
						return nil
					}
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if kind == "full" {
							o.ForceFullSync()
						} else {
							old := slices[n/2]
							changed := old.DeepCopy()
							changed.Endpoints[9].Addresses = []string{fmt.Sprintf("10.200.%d.%d", i>>8&255, i&255)}
							slices[n/2] = changed
							o.OnEndpointSliceUpdate(old, changed)
						}
						res, err := o.Sync()
						if err != nil {
							return err
						}
						if res.Full != (kind == "full") {
							return fmt.Errorf("sync %d: Full %v", i, res.Full)
						}
					}
					b.StopTimer()
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
