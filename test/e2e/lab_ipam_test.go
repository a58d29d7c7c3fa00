package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testkit"
)

// Restarting herald's controller changes no Service's IP, not even for a moment: a
// watch on Services from before the restart until the restarted controller has handed
// out a new IP sees no ingress change, and the new IP is none of those held.
func TestLabControllerRestartKeepsIPs(t *testing.T) {
	f := fullLabFor(t)
	shared := testkit.Annotated(heraldv1.AnnotationAllowSharedIP, "he-restart")
	f.createService(t, testkit.LBService("default", "keep-a", webpods, shared))
	f.createService(t, testkit.LBService("default", "keep-b",
		webpods, shared, func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 }))
	f.waitIP(t, "keep-a")
	f.waitIP(t, "keep-b")

	ctx := t.Context()
	before, from := f.lbIngresses(t)
	for _, name := range append(slices.Clone(walkthrough), "keep-a", "keep-b") {
		if before["default/"+name] == "" {
			t.Fatalf("Service %s has no IP before the restart: %v", name, before)
		}
	}
	stopWatch := f.watchIngress(t, before, from)

	if err := f.s.RestartController(ctx); err != nil {
		t.Fatal(err)
	}
	// The restarted controller has read every allocation once it gives out a new IP.
	f.createService(t, testkit.LBService("default", "after-restart", webpods))
	probe := f.waitIP(t, "after-restart")
	changes := stopWatch()
	for k, ip := range before {
		if slices.Contains(strings.Split(ip, ","), probe.String()) {
			t.Errorf("the restarted controller gave %s, held by %s, to Service after-restart", probe, k)
		}
	}
	if len(changes) > 0 {
		t.Errorf("Services' IPs changed across the controller restart:\n%s", strings.Join(changes, "\n"))
	}
	after, _ := f.lbIngresses(t)
	maps.DeleteFunc(after, func(k, _ string) bool { _, held := before[k]; return !held })
	if !maps.Equal(before, after) {
		t.Errorf("Services' IPs before the controller restart %v, after %v", before, after)
	}
	for _, name := range walkthrough {
		f.expectCurls(t, "http://"+f.vips[name].String()+"/", 20, name+" after the controller restart")
	}
}

// lbIngresses returns the external IPs of every LoadBalancer Service by
// namespace/name, and the resourceVersion of that list.
func (f *fullLab) lbIngresses(tb testing.TB) (map[string]string, string) {
	tb.Helper()
	list, err := f.Kube.CoreV1().Services("").List(tb.Context(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			out[s.Namespace+"/"+s.Name] = ingressOf(&s)
		}
	}
	return out, list.ResourceVersion
}

// watchIngress watches Services from resourceVersion from on and records every change
// of the external IPs of those in held (by namespace/name), and their deletion. stop
// ends the watch and returns what it saw.
func (f *fullLab) watchIngress(tb testing.TB, held map[string]string, from string) (stop func() []string) {
	tb.Helper()
	w, err := f.Kube.CoreV1().Services("").Watch(tb.Context(), metav1.ListOptions{ResourceVersion: from})
	if err != nil {
		tb.Fatal(err)
	}
	var changes []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*corev1.Service)
			if !ok {
				continue
			}
			k := s.Namespace + "/" + s.Name
			was, known := held[k]
			if known && (ev.Type == watch.Modified && ingressOf(s) != was || ev.Type == watch.Deleted) {
				changes = append(changes, fmt.Sprintf("%s %s: ingress %q, was %q", ev.Type, k, ingressOf(s), was))
			}
		}
	}()
	return func() []string {
		w.Stop()
		<-done
		return changes
	}
}

func ingressOf(s *corev1.Service) string {
	var ips []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP)
	}
	return strings.Join(ips, ",")
}

// A pool of two addresses serves two Services; the third waits without an IP and with
// a Warning Event saying the pool is exhausted; when one of the first two is deleted,
// the third gets its address.
func TestLabPoolExhaustionAndRelease(t *testing.T) {
	f := fullLabFor(t)
	pool := &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "he-small"},
		Spec: heraldv1.IPAddressPoolSpec{Addresses: []heraldv1.AddressRange{"172.18.255.10-172.18.255.11"}, AutoAssign: ptrTo(false)}}
	f.createObject(t, pool)
	f.createObject(t, &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "he-small"},
		Spec: heraldv1.L2AdvertisementSpec{IPAddressPools: []string{"he-small"}}})
	fromSmall := testkit.Annotated(heraldv1.AnnotationAddressPool, "he-small")

	f.createService(t, testkit.LBService("default", "ex1", webpods, fromSmall))
	if ip := f.waitIP(t, "ex1"); ip != netip.MustParseAddr("172.18.255.10") {
		t.Fatalf("ex1 got %s, want 172.18.255.10, the first address of he-small", ip)
	}
	f.createService(t, testkit.LBService("default", "ex2", webpods, fromSmall))
	if ip := f.waitIP(t, "ex2"); ip != netip.MustParseAddr("172.18.255.11") {
		t.Fatalf("ex2 got %s, want 172.18.255.11, the last address of he-small", ip)
	}
	ex3 := f.createService(t, testkit.LBService("default", "ex3", webpods, fromSmall))
	f.expectEvent(t, ex3, corev1.EventTypeWarning, "AllocationFailed",
		noteIs(`no available IPs in pool "he-small" (IPv4: 2 of 2 in use); the Service keeps running and gets an IP as soon as one is free`),
		"saying he-small is exhausted")
	if ip, err := f.ingress(t.Context(), "ex3"); err != nil || ip.IsValid() {
		t.Fatalf("ex3 has IP %v (%v) although the pool is exhausted", ip, err)
	}
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "he-small's status counts 2 in use, 0 available", func() error {
		f.getObject(t, pool)
		if st := pool.Status; st.InUse != 2 || st.Available != 0 || st.AssignedIPv4 != 2 || st.AvailableIPv4 != 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	for _, ip := range []string{"172.18.255.10", "172.18.255.11"} {
		f.expectCurls(t, "http://"+ip+"/", 20, "he-small's "+ip)
	}

	f.deleteService(t, "ex1")
	if ip := f.waitIP(t, "ex3"); ip != netip.MustParseAddr("172.18.255.10") {
		t.Fatalf("ex3 got %s once ex1 was deleted, want 172.18.255.10, the address ex1 released", ip)
	}
	f.expectEvent(t, ex3, corev1.EventTypeNormal, "IPAllocated", noteIs(`Assigned IP 172.18.255.10 from pool "he-small"`), "for the released address")
	if ip, _ := f.ingress(t.Context(), "ex2"); ip != netip.MustParseAddr("172.18.255.11") {
		t.Errorf("ex2 has %v after ex1's deletion, want 172.18.255.11 still", ip)
	}
	f.expectOwner(t, netip.MustParseAddr("172.18.255.10"), f.owner(netip.MustParseAddr("172.18.255.10")), "ex3's address")
	f.expectCurls(t, "http://172.18.255.10/", 20, "ex3 on the released address")
}

// kubectl apply of a pool with a malformed address entry is refused by the API server
// with a message naming the entry, and nothing is created.
func TestLabBadPoolRefused(t *testing.T) {
	f := fullLabFor(t)
	for _, c := range []struct {
		name      string
		addresses []string
		want      []string
	}{
		{"he-bad-range", []string{"172.18.255.250-172.18.255.200"},
			[]string{"spec.addresses[0]", `range "172.18.255.250-172.18.255.200" starts after it ends`}},
		{"he-bad-second", []string{"172.18.254.0/28", "172.18.254.300/32"},
			[]string{"spec.addresses[1]", `"172.18.254.300/32" is neither a CIDR (like 192.168.10.0/24) nor a range start-end of two IP addresses`}},
	} {
		yaml := fmt.Sprintf("apiVersion: herald.dev/v1beta1\nkind: IPAddressPool\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  addresses:\n", c.name, heraldNS)
		for _, a := range c.addresses {
			yaml += fmt.Sprintf("  - %q\n", a)
		}
		file := filepath.Join(t.TempDir(), c.name+".yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := f.s.Kubectl(t.Context(), "apply", "-f", file)
		if err == nil {
			_, _ = f.s.Kubectl(context.Background(), "delete", "-f", file)
			t.Errorf("kubectl apply of pool %s with addresses %q succeeded: %s", c.name, c.addresses, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("kubectl apply of pool %s with addresses %q: the refusal does not say %q:\n%v", c.name, c.addresses, w, err)
			}
		}
		t.Logf("refused as wanted: %v", err)
		var got heraldv1.IPAddressPool
		if err := f.c.Get(t.Context(), keyIn(heraldNS, c.name), &got); !apierrors.IsNotFound(err) {
			t.Errorf("pool %s exists after the refusal (%v)", c.name, err)
		}
	}
}

// A Service asking for an IP outside every pool gets a Warning Event and no IP, nobody
// answers for that IP, and the other Services keep working, new ones included.
func TestLabIPOutsidePools(t *testing.T) {
	f := fullLabFor(t)
	const outside = "172.18.254.10"
	svc := f.createService(t, testkit.LBService("default", "outside",
		webpods, testkit.Annotated(heraldv1.AnnotationLoadBalancerIPs, outside)))
	f.expectEvent(t, svc, corev1.EventTypeWarning, "AllocationFailed",
		noteHas("IP "+outside+" is not available to this Service"), "saying the IP is not available")
	if ip, err := f.ingress(t.Context(), "outside"); err != nil || ip.IsValid() {
		t.Fatalf("Service outside has IP %v (%v), want none", ip, err)
	}
	f.expectSilence(t, netip.MustParseAddr(outside), "an IP no pool holds")
	for _, name := range walkthrough {
		f.expectCurls(t, "http://"+f.vips[name].String()+"/", 50, name+" while Service outside waits")
	}
	f.createService(t, testkit.LBService("default", "beside-outside", webpods))
	ip := f.waitIP(t, "beside-outside")
	f.expectCurls(t, "http://"+ip.String()+"/", 20, "a Service created meanwhile")
	if ip, err := f.ingress(t.Context(), "outside"); err != nil || ip.IsValid() {
		t.Errorf("Service outside has IP %v (%v) in the end, want none", ip, err)
	}
}
