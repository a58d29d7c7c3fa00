package agent

import (
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWhoamiAnswersLikeTraefikWhoami(t *testing.T) {
	w := whoami{hostname: "webpod1", ips: []string{"127.0.0.1", "::1", "10.244.1.2"}}
	req := httptest.NewRequest("GET", "http://172.18.255.200/", nil)
	req.RemoteAddr = "172.18.0.4:51234"
	req.Header.Set("User-Agent", "curl/8.5.0")
	req.Header.Set("Accept", "*/*")
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, req)
	want := "Hostname: webpod1\nIP: 127.0.0.1\nIP: ::1\nIP: 10.244.1.2\nRemoteAddr: 172.18.0.4:51234\n" +
		"GET / HTTP/1.1\nHost: 172.18.255.200\nAccept: */*\nUser-Agent: curl/8.5.0\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestNamespaceFor(t *testing.T) {
	valid := regexp.MustCompile(`^hl-[a-z0-9]+$`)
	a, b := NamespaceFor("hl-", "default", "web-1"), NamespaceFor("hl-", "default", "web1")
	c := NamespaceFor("hl-", "other", "web1")
	long := NamespaceFor("hl-", "default", strings.Repeat("x", 253))
	for _, ns := range []string{a, b, c, long} {
		if !valid.MatchString(ns) {
			t.Errorf("%q: netlab.Cleanup would not recognise it as the lab's", ns)
		}
	}
	if a == b || b == c {
		t.Errorf("pods that reduce alike share a namespace: %s %s %s", a, b, c)
	}
	if !strings.HasPrefix(b, "hl-podweb1") || len(long) > len("hl-pod")+maxNameChars+4 {
		t.Errorf("names %q, %q: want hl-pod<name><4 hex>, bounded", b, long)
	}
	if v := vethFor("0f6e2c1a-3b6f-4c1e-9d55-8f6c2b1a0e11"); len(v) > 15 {
		t.Errorf("veth name %q is longer than an interface name may be", v)
	}
}

func TestIPAM(t *testing.T) {
	a, err := newIPAM(netip.MustParsePrefix("10.244.1.0/29"))
	if err != nil {
		t.Fatal(err)
	}
	if gw := a.gateway(); gw.String() != "10.244.1.1" {
		t.Errorf("gateway %s", gw)
	}
	var got []string
	for {
		ip, err := a.allocate()
		if err != nil {
			break
		}
		got = append(got, ip.String())
	}
	// .0 is the network, .1 the gateway, .7 the broadcast address.
	if strings.Join(got, " ") != "10.244.1.2 10.244.1.3 10.244.1.4 10.244.1.5 10.244.1.6" {
		t.Errorf("allocated %v", got)
	}
	a.release(netip.MustParseAddr("10.244.1.4"))
	if ip, err := a.allocate(); err != nil || ip.String() != "10.244.1.4" {
		t.Errorf("after a release got %v, %v; want 10.244.1.4", ip, err)
	}
	v6, err := newIPAM(netip.MustParsePrefix("fd00:10:244:1::/64"))
	if err != nil {
		t.Fatal(err)
	}
	if ip, err := v6.allocate(); err != nil || ip.String() != "fd00:10:244:1::2" {
		t.Errorf("first IPv6 pod address %v, %v; want fd00:10:244:1::2", ip, err)
	}
	for _, bad := range []string{"10.244.1.0/31", "fd00::/127", "10.244.1.1/24"} {
		if _, err := newIPAM(netip.MustParsePrefix(bad)); err == nil {
			t.Errorf("pod CIDR %s was accepted", bad)
		}
	}
}

func TestRunningStatusIsWhatEndpointSlicesNeed(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "webpod1", UID: "u1"},
		Spec:       corev1.PodSpec{NodeName: "worker", Containers: []corev1.Container{{Name: "c", Image: "traefik/whoami"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
	}
	rec := PodRecord{UID: "u1", IP: netip.MustParseAddr("10.244.1.2")}
	if reported(pod, rec) {
		t.Fatal("a Pending pod counts as reported")
	}
	runningStatus(pod, rec, []string{"172.18.0.3"}, metav1.Now())
	st := pod.Status
	if st.Phase != corev1.PodRunning || st.PodIP != "10.244.1.2" || st.PodIPs[0].IP != "10.244.1.2" || st.HostIP != "172.18.0.3" ||
		st.QOSClass != corev1.PodQOSBestEffort || !st.ContainerStatuses[0].Ready || st.ContainerStatuses[0].State.Running == nil {
		t.Errorf("status %+v", st)
	}
	if !reported(pod, rec) {
		t.Error("the status written does not count as reported: the agent would write it forever")
	}
}

func TestRunningStatusOfADualStackPodListsBothFamilies(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "webpod1", UID: "u1"},
		Spec:       corev1.PodSpec{NodeName: "worker", Containers: []corev1.Container{{Name: "c", Image: "traefik/whoami"}}},
	}
	rec := PodRecord{UID: "u1", IP: netip.MustParseAddr("10.244.1.2"), IP6: netip.MustParseAddr("fd00:10:244:1::2")}
	runningStatus(pod, rec, []string{"172.18.0.3", "fc00:f853:ccd:e793::3"}, metav1.Now())
	st := pod.Status
	if st.PodIP != "10.244.1.2" || len(st.PodIPs) != 2 || st.PodIPs[1].IP != "fd00:10:244:1::2" ||
		st.HostIP != "172.18.0.3" || len(st.HostIPs) != 2 || st.HostIPs[1].IP != "fc00:f853:ccd:e793::3" {
		t.Errorf("pod IPs %v, host IPs %v: want both families, IPv4 first", st.PodIPs, st.HostIPs)
	}
	if !reported(pod, rec) {
		t.Error("the status written does not count as reported")
	}
	pod.Status.PodIPs = pod.Status.PodIPs[:1]
	if reported(pod, rec) {
		t.Error("a status without the IPv6 address counts as reported")
	}
}
