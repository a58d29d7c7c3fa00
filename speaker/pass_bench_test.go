package speaker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/poolapi"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
)

// BenchmarkElectionPass times, at 100 and 1,000 nodes with 10,000 Services (one IP and
// two endpoints each), the parts of a speaker's election pass around the election
// itself, after one member died: copying the objects out of the cache (what a cached
// List does for each object), BuildView, and the Elector's re-election. The sum is the
// speaker's work between a death and its first gratuitous ARP, memberlist's detection
// aside.
func BenchmarkElectionPass(b *testing.B) {
	for _, nodes := range []int{100, 1_000} {
		in := passInputs(nodes, 10_000)
		b.Run(fmt.Sprintf("nodes=%d/copy", nodes), func(b *testing.B) {
			for b.Loop() {
				for _, s := range in.Services {
					_ = s.DeepCopy()
				}
				for _, s := range in.EndpointSlices {
					_ = s.DeepCopy()
				}
				for _, n := range in.Nodes {
					_ = n.DeepCopy()
				}
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/BuildView", nodes), func(b *testing.B) {
			for b.Loop() {
				BuildView(in)
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/BuildView+Elect-after-death", nodes), func(b *testing.B) {
			var e election.Elector
			v, svcs, _ := BuildView(in)
			e.Elect(v, svcs)
			i := 0
			for b.Loop() {
				gone := in.Members[i*7%len(in.Members)]
				i++
				without := in
				without.Members = slices.DeleteFunc(slices.Clone(in.Members), func(m string) bool { return m == gone })
				b.StopTimer()
				v, svcs, _ := BuildView(in)
				e.Elect(v, svcs)
				b.StartTimer()
				v, svcs, _ = BuildView(without)
				e.Elect(v, svcs)
			}
		})
	}
}

// passInputs builds a cluster of nodes with services LoadBalancer Services, each
// with one IP from pool1 and two ready endpoints on nodes of its own.
func passInputs(nodes, services int) Inputs {
	in := Inputs{
		Pools:          []*heraldv1.IPAddressPool{addressPool("pool1", time.Unix(0, 0), "10.100.0.0/14")},
		Advertisements: []*heraldv1.L2Advertisement{{ObjectMeta: metav1.ObjectMeta{Name: "all"}}},
	}
	in.PoolOf = poolapi.Index(in.Pools).PoolOf
	for i := range nodes {
		name := fmt.Sprintf("node-%04d", i)
		in.Members = append(in.Members, name)
		in.Nodes = append(in.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}}})
	}
	for i := range services {
		name := fmt.Sprintf("svc-%05d", i)
		in.Services = append(in.Services, testkit.LBService("default", name,
			testkit.Ingress(fmt.Sprintf("10.%d.%d.%d", 100+i>>16, i>>8&0xff, i&0xff))))
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-abcde",
				Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		for j := range 2 {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.244.%d.%d", (i*2+j)>>8&0xff, (i*2+j)&0xff)},
				NodeName:   ptr.To(in.Members[(i*2+j)%nodes]),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)},
			})
		}
		in.EndpointSlices = append(in.EndpointSlices, sl)
	}
	return in
}
