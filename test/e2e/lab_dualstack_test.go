package e2e

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testenv"
)

// dualStackPrefix names the namespaces of TestLabDualStack's own lab.
const dualStackPrefix = "hd-"

// TestLabDualStack is the walkthrough on kind's dual-stack network: a pool with an IPv4
// and an IPv6 range, and Services asking for IPv6 only, preferring and requiring both
// families. Seen from the client, every IPv6 VIP is answered by one MAC over NDP, a
// dual-stack Service's two VIPs by the same node, and requests over either family reach
// the walkthrough's pods through the speakers' proxier (ip6tables for IPv6). A node
// reaches an IPv6 ClusterIP too.
func TestLabDualStack(t *testing.T) {
	f := ownLab(t, dualStackPrefix, "dualstack", lab.Config{Workers: 3, DualStack: true}, false)
	f.createObject(t, &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "dual"},
		Spec: heraldv1.IPAddressPoolSpec{Addresses: []heraldv1.AddressRange{
			"172.18.255.200-172.18.255.250", "fc00:f853:ccd:e793::c8-fc00:f853:ccd:e793::fa"}}})
	f.createObject(t, &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "dual"},
		Spec: heraldv1.L2AdvertisementSpec{IPAddressPools: []string{"dual"}}})

	services := []struct {
		name     string
		policy   corev1.IPFamilyPolicy
		families []corev1.IPFamily // asked for; nil lets the API server choose
		want     []corev1.IPFamily // of the VIPs, in order
	}{
		{"v6only", corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{corev1.IPv6Protocol}, []corev1.IPFamily{corev1.IPv6Protocol}},
		{"prefer", corev1.IPFamilyPolicyPreferDualStack, nil, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}},
		{"require", corev1.IPFamilyPolicyRequireDualStack, []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
			[]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}},
	}
	created := map[string]*corev1.Service{}
	for _, s := range services {
		created[s.name] = f.createService(t, lbService(s.name, func(svc *corev1.Service) {
			svc.Spec.IPFamilyPolicy, svc.Spec.IPFamilies = &s.policy, s.families
		}))
	}
	for _, s := range services {
		vips := f.waitIngresses(t, s.name, len(s.want))
		var got []corev1.IPFamily
		for _, v := range vips {
			got = append(got, map[bool]corev1.IPFamily{true: corev1.IPv6Protocol, false: corev1.IPv4Protocol}[v.Is6()])
		}
		if !slices.Equal(got, s.want) {
			t.Fatalf("Service %s (%s %v) got VIPs %v, want families %v", s.name, s.policy, s.families, vips, s.want)
		}
		t.Logf("Service %s (%s): VIPs %v", s.name, s.policy, vips)

		// One owner, the same for both families of a dual-stack Service.
		var owner string
		for _, vip := range vips {
			mac := f.settledOwner(t, vip, s.name)
			if owner != "" && mac != owner {
				t.Errorf("Service %s: %s is answered by %s but its other VIP by %s; want one node for both families",
					s.name, vip, f.describeMACs([]string{mac}), f.describeMACs([]string{owner}))
			}
			owner = mac
		}
		t.Logf("Service %s: owner %s", s.name, f.describeMACs([]string{owner}))

		for _, vip := range vips {
			url := "http://" + netip.AddrPortFrom(vip, 80).String() + "/"
			res := f.expectCurls(t, url, 50, "Service "+s.name)
			for _, pod := range []string{"webpod1", "webpod2"} {
				if res.Counts["Hostname: "+pod] == 0 {
					t.Errorf("Service %s: none of 50 requests to %s reached %s: %v", s.name, url, pod, res.Counts)
				}
			}
		}
	}

	// No one answers for an IPv6 pool address no Service holds.
	free := netip.MustParseAddr("fc00:f853:ccd:e793::fa")
	silent := labtest.WatchNDP(t, f.clientNS, free, 20*time.Millisecond)
	labtest.WaitARP(t, silent, ownerWindow, labWait, "the unused "+free.String(), labtest.Silence(), f.hostOfMAC)
	silent.Close()

	// Through ip6tables: an IPv6 pod answers an IPv6 VIP from its IPv6 address.
	body, err := f.get(t, "http://"+netip.AddrPortFrom(f.waitIngresses(t, "v6only", 1)[0], 80).String()+"/")
	if err != nil || !strings.Contains(body, "IP: fd00:10:244:") {
		t.Errorf("an answer over IPv6 lists no pod address in %s (%v):\n%s", lab.ClusterCIDR6, err, body)
	}

	// An IPv6 ClusterIP from worker3, which runs no pod: the proxier's OUTPUT rules.
	clusterIP, err := netip.ParseAddr(created["v6only"].Spec.ClusterIP)
	if err != nil || !clusterIP.Is6() {
		t.Fatalf("Service v6only has ClusterIP %q (%v), want an IPv6 one of %s", created["v6only"].Spec.ClusterIP, err, lab.ServiceCIDR6)
	}
	w3, err := f.s.Worker("worker3")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + netip.AddrPortFrom(clusterIP, 80).String() + "/"
	labtest.Eventually(t, "worker3 reaches the IPv6 ClusterIP "+url, func() error {
		body, err := labtest.Get(t.Context(), w3.Namespace, url)
		if err == nil && !strings.Contains(body, "Hostname: webpod") {
			err = fmt.Errorf("answer without a webpod Hostname:\n%s", body)
		}
		return err
	})
}

// waitIngresses waits until the Service has n external IPs and returns them in the
// order of its status.
func (f *fullLab) waitIngresses(tb testing.TB, name string, n int) []netip.Addr {
	tb.Helper()
	var vips []netip.Addr
	err := testenv.Poll(labWait, 100*time.Millisecond, func() error {
		svc, err := f.Kube.CoreV1().Services("default").Get(tb.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		vips = vips[:0]
		for _, in := range svc.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(in.IP)
			if err != nil {
				return fmt.Errorf("ingress %q: %w", in.IP, err)
			}
			vips = append(vips, ip)
		}
		if len(vips) != n {
			return fmt.Errorf("external IPs %v, want %d", vips, n)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("Service %s: %v", name, err)
	}
	return vips
}

// settledOwner waits until exactly one worker's MAC answers for vip from the client
// over a whole ownerWindow, over NDP for an IPv6 VIP and ARP for an IPv4 one, and
// returns it.
func (f *fullLab) settledOwner(tb testing.TB, vip netip.Addr, service string) string {
	tb.Helper()
	var w lab.NeighbourWatch
	if vip.Is6() {
		nw := labtest.WatchNDP(tb, f.clientNS, vip, 20*time.Millisecond)
		defer nw.Close()
		w = nw
	} else {
		aw := labtest.WatchARP(tb, f.clientNS, vip, 20*time.Millisecond)
		defer aw.Close()
		w = aw
	}
	var owner string
	labtest.WaitARP(tb, w, ownerWindow, labWait, "Service "+service, labtest.ARPWant{
		What: "exactly one, a worker's",
		OK: func(macs []string) bool {
			if len(macs) != 1 || !slices.Contains(slices.Collect(maps.Values(f.macs)), macs[0]) {
				return false
			}
			owner = macs[0]
			return true
		},
	}, f.hostOfMAC)
	return owner
}
