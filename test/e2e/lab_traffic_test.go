package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
)

// The walkthrough (MetalLB's layer-2 walkthrough on kind, with herald): svc1..svc3 get addresses of the pool, each is
// announced by exactly one node, the one the election picks, and 100 curls per VIP from
// the client all succeed and reach both webpod1 and webpod2.
func TestLabWalkthrough(t *testing.T) {
	f := fullLabFor(t)
	pool := netip.MustParsePrefix("172.18.255.192/26") // covers .200-.250; checked exactly below
	seen := map[netip.Addr]string{}
	for _, name := range walkthrough {
		vip := f.vips[name]
		if !pool.Contains(vip) || vip.As4()[3] < 200 || vip.As4()[3] > 250 {
			t.Errorf("%s has %s, outside the pool 172.18.255.200-172.18.255.250", name, vip)
		}
		if other, dup := seen[vip]; dup {
			t.Errorf("%s and %s both have %s", name, other, vip)
		}
		seen[vip] = name
	}
	for _, name := range walkthrough {
		vip := f.vips[name]
		f.expectOwner(t, vip, f.owner(vip), name+" announced")
		res := f.expectCurls(t, "http://"+vip.String()+"/", 100, name)
		var b strings.Builder
		res.Print(&b)
		t.Logf("%s (%s, owner %s): 100 curls\n%s", name, vip, f.owner(vip), b.String())
		w1, w2 := res.Counts["Hostname: webpod1"], res.Counts["Hostname: webpod2"]
		// The proxier picks each endpoint with probability 1/2: fewer than 10 of 100 on
		// one pod happens by chance once in 10^17 runs.
		if w1+w2 != 100 || w1 < 10 || w2 < 10 {
			t.Errorf("%s: answers by Hostname %v; want webpod1 and webpod2 only, each at least 10 of 100", name, res.Counts)
		}
	}
}

// externalTrafficPolicy Local: only nodes with a ready local pod announce the VIP, the
// traffic goes to the owner's own pod only, and the pod sees the client's address.
func TestLabLocalTrafficPolicy(t *testing.T) {
	f := fullLabFor(t)
	sel := map[string]string{"herald-e2e/app": "local"}
	f.createPod(t, "local3", "worker3", sel)
	svc := f.createService(t, testkit.LBService("default", "local", webpods, func(s *corev1.Service) {
		s.Spec.Selector = sel
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}))
	vip := f.waitIP(t, svc.Name)
	// worker2 never has a pod of the Service: it must never answer, whatever happens.
	watch := labtest.WatchARP(t, f.clientNS, vip, 20*time.Millisecond)
	defer watch.Close()
	start := time.Now()

	// One pod, on worker3: worker3 announces, whatever the hash prefers.
	t.Logf("%s: rendezvous order %v; the only local pod is on worker3", vip, election.Order(vip, f.nodes))
	f.expectOwner(t, vip, "worker3", "the only pod on worker3")
	f.expectLocalAnswers(t, vip, "local3")

	// A second pod, on worker: the election picks between worker and worker3 only.
	f.createPod(t, "local1", "worker", sel)
	owner := f.owner(vip, "worker", "worker3")
	f.expectOwner(t, vip, owner, "pods on worker and worker3")
	podOn := map[string]string{"worker": "local1", "worker3": "local3"}
	f.expectLocalAnswers(t, vip, podOn[owner])

	// The owner's pod goes away: the other node with a pod takes the VIP.
	other := without([]string{"worker", "worker3"}, owner)[0]
	f.deletePod(t, podOn[owner])
	f.expectOwner(t, vip, other, "the owner's pod deleted")
	f.expectLocalAnswers(t, vip, podOn[other])

	if macs := watch.MACsSince(start); slices.Contains(macs, f.macs["worker2"]) {
		t.Errorf("worker2, which never had a pod of the Service, answered ARP for %s: answers came from %s", vip, f.describeMACs(macs))
	}
}

// expectLocalAnswers requires 20 requests from the client in a row to vip to be
// answered by pod, with the client's own address of vip's family (172.18.0.100, or
// fc00:f853:ccd:e793::100 in a dual-stack lab) as the pod sees it.
func (f *fullLab) expectLocalAnswers(t *testing.T, vip netip.Addr, pod string) {
	t.Helper()
	url, client := lab.VIPURL(vip), f.clientAddr(t, vip)
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "a request to "+url+" answered by "+pod, func() error {
		body, err := f.get(t, url)
		if err == nil && whoamiField(body, "Hostname") != pod {
			err = fmt.Errorf("answered by %q", whoamiField(body, "Hostname"))
		}
		return err
	})
	for i := range 20 {
		body, err := f.get(t, url)
		if err != nil {
			t.Fatalf("request %d to %s (externalTrafficPolicy Local): %v", i+1, url, err)
		}
		host, remote := whoamiField(body, "Hostname"), whoamiField(body, "RemoteAddr")
		if host != pod {
			t.Fatalf("request %d to %s was answered by %q, want the owner's local pod %s", i+1, url, host, pod)
		}
		if ap, err := netip.ParseAddrPort(remote); err != nil || ap.Addr() != client {
			t.Fatalf("pod %s saw the request from %q, want the client's own address %s (externalTrafficPolicy Local keeps it)", pod, remote, client)
		}
	}
}

// clientAddr is the client's own address of ip's family.
func (f *fullLab) clientAddr(tb testing.TB, ip netip.Addr) netip.Addr {
	tb.Helper()
	h, err := f.s.Host(lab.ClientHost)
	if err != nil {
		tb.Fatal(err)
	}
	if !ip.Is6() {
		return h.Addr
	}
	if !h.Addr6.IsValid() {
		tb.Fatalf("the client has no IPv6 address to reach %s from: the lab is not dual-stack", ip)
	}
	return h.Addr6
}

// Two Services with one sharing key and different ports share one IP, announced by one
// node, and each port reaches its own Service's pods.
func TestLabSharedIP(t *testing.T) {
	f := fullLabFor(t)
	shared := testkit.Annotated(heraldv1.AnnotationAllowSharedIP, "he-share")
	a := f.createService(t, testkit.LBService("default", "share-a", webpods, shared, func(s *corev1.Service) {
		s.Spec.Selector = map[string]string{podLabel: "webpod1"}
	}))
	ipA := f.waitIP(t, a.Name)
	b := f.createService(t, testkit.LBService("default", "share-b", webpods, shared, func(s *corev1.Service) {
		s.Spec.Selector = map[string]string{podLabel: "webpod2"}
		s.Spec.Ports[0].Port = 8080
		s.Spec.Ports[0].TargetPort = intstr.FromInt32(80)
	}))
	ipB := f.waitIP(t, b.Name)
	if ipA != ipB {
		t.Fatalf("share-a has %s, share-b %s: Services with one sharing key and disjoint ports should share an IP", ipA, ipB)
	}
	f.expectOwner(t, ipA, f.owner(ipA), "shared IP")
	for _, c := range []struct{ port, pod string }{{"80", "webpod1"}, {"8080", "webpod2"}} {
		url := fmt.Sprintf("http://%s:%s/", ipA, c.port)
		res := f.expectCurls(t, url, 50, "shared IP port "+c.port)
		if res.Counts["Hostname: "+c.pod] != 50 {
			t.Errorf("port %s of the shared IP: answers %v; want all 50 from %s", c.port, res.Counts, c.pod)
		}
	}
}

// A deleted Service stops answering: no node answers ARP for its IP any more, and its
// KUBE-SVC-/KUBE-EXT-/KUBE-SEP- chains leave every node's nat table.
func TestLabServiceDeletion(t *testing.T) {
	f := fullLabFor(t)
	svc := f.createService(t, testkit.LBService("default", "gone", webpods))
	vip := f.waitIP(t, svc.Name)
	owner := f.owner(vip)
	f.expectOwner(t, vip, owner, "before the deletion")
	f.expectCurls(t, "http://"+vip.String()+"/", 20, "before the deletion")

	svcChain := kubeProxyChain("KUBE-SVC-", "default/gone:http", corev1.ProtocolTCP)
	extChain := kubeProxyChain("KUBE-EXT-", "default/gone:http", corev1.ProtocolTCP)
	keep := kubeProxyChain("KUBE-SVC-", "default/svc1:svc1-webport", corev1.ProtocolTCP)
	chains := map[string][]string{} // by node
	for _, n := range f.nodes {
		dump := f.natTable(t, n)
		seps := chainsJumpedTo(dump, svcChain, "KUBE-SEP-")
		if !hasChain(dump, svcChain) || !hasChain(dump, extChain) || len(seps) != 2 {
			t.Fatalf("%s's nat table lacks Service gone's chains before the deletion: %s %v, %s %v, endpoint chains %v (want 2)",
				n, svcChain, hasChain(dump, svcChain), extChain, hasChain(dump, extChain), seps)
		}
		chains[n] = append([]string{svcChain, extChain}, seps...)
	}
	t.Logf("owner %s; chains %v", owner, chains[owner])

	f.deleteService(t, svc.Name)
	f.expectSilence(t, vip, "Service deleted")
	for _, n := range f.nodes {
		testkit.Eventually(t, labtest.Wait, labtest.Interval, n+" drops the chains of the deleted Service", func() error {
			dump := f.natTable(t, n)
			var left []string
			for _, c := range chains[n] {
				if strings.Contains(dump, c) {
					left = append(left, c)
				}
			}
			if strings.Contains(dump, `"default/gone`) {
				left = append(left, `comments naming "default/gone"`)
			}
			if len(left) > 0 {
				return fmt.Errorf("still there: %v", left)
			}
			return nil
		})
		if !hasChain(f.natTable(t, n), keep) {
			t.Errorf("%s lost svc1's chain %s too", n, keep)
		}
	}
	if _, err := f.get(t, "http://"+vip.String()+"/"); err == nil {
		t.Errorf("a request to %s, the IP of the deleted Service, succeeded", vip)
	}
}
