package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/testkit"
)

// addPod adds a pod on the lab's segment that answers HTTP on 8080 with its name and
// the client address it sees, and UDP on 5353 with its name. Its route to the client
// goes through the node, as a pod's would: replies to DNATed traffic must pass the
// node's conntrack to be translated back.
func addPod(t *testing.T, lab *netlab.Lab, name, ip string) {
	t.Helper()
	pod := addHost(t, lab, name, ip)
	mustExec(t, pod, "ip", "route", "add", "172.31.0.2/32", "via", "172.31.0.3")
	l, err := pod.Listen("tcp", ":8080")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "%s %s", name, host)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	pc, err := pod.ListenPacket("udp", ":5353")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name), from)
		}
	}()
}

// httpGet fetches url from inside the host's namespace.
func httpGet(h *netlab.Host, url string, timeout time.Duration) (int, string, error) {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: h.DialContext, DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestProxierTraffic sends real traffic from a client namespace through the node's
// rules to pod namespaces, in both modes: a VIP, a ClusterIP and a NodePort reach the
// pod; with externalTrafficPolicy Local the pod sees the client's address and the
// health check node port says 200 on a node with a local endpoint and 503 without;
// ClientIP affinity keeps a client on one pod; a Service without endpoints is rejected
// and a client outside loadBalancerSourceRanges dropped; UDP flows move to the new
// endpoint once the old one is removed (conntrack cleanup).
func TestProxierTraffic(t *testing.T) {
	if _, err := exec.LookPath("conntrack"); err != nil {
		t.Fatalf("the UDP part needs the conntrack binary (Debian package conntrack): %v", err)
	}
	t.Run("iptables", func(t *testing.T) { testProxierTraffic(t, ModeIPTables, "hpxt-") })
	t.Run("nftables", func(t *testing.T) {
		// Every nft transaction reopens the knftables handle, which otherwise only
		// happens after full syncs of thousands of Services.
		was := largeTransaction
		largeTransaction = 0
		t.Cleanup(func() { largeTransaction = was })
		testProxierTraffic(t, ModeNFTables, "hpxu-")
	})
}

func testProxierTraffic(t *testing.T, mode Mode, prefix string) {
	lab := newLab(t, prefix)
	node := addNode(t, lab)
	client := addClient(t, lab)
	for _, prefix := range []string{"198.51.100.0/24", "10.96.0.0/16"} {
		mustExec(t, client, "ip", "route", "add", prefix, "via", "172.31.0.3")
	}
	addPod(t, lab, "pod1", "172.31.0.65")
	addPod(t, lab, "pod2", "172.31.0.66")
	h := startProxier(t, node, func(c *Config) { c.Mode = mode })

	local := func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 30200
	}
	remote := func(s *corev1.Service) {
		local(s)
		s.Spec.HealthCheckNodePort = 30201
	}
	dns := func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053}}
	}
	sticky := func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }
	fenced := func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"} }
	svcs := []*corev1.Service{
		webService(),
		testkit.LBService("demo", "local",
			testkit.ClusterIP("10.96.0.20"), testkit.Ingress("198.51.100.20"), testkit.NodePort(30081), local),
		testkit.LBService("demo", "remote",
			testkit.ClusterIP("10.96.0.21"), testkit.Ingress("198.51.100.21"), testkit.NodePort(30082), remote),
		testkit.LBService("demo", "dns", testkit.ClusterIP("10.96.0.30"), testkit.Ingress("198.51.100.30"), dns),
		testkit.LBService("demo", "sticky", testkit.ClusterIP("10.96.0.40"), testkit.Ingress("198.51.100.40"), sticky),
		testkit.LBService("demo", "empty", testkit.ClusterIP("10.96.0.41"), testkit.Ingress("198.51.100.41")),
		testkit.LBService("demo", "fenced", testkit.ClusterIP("10.96.0.42"), testkit.Ingress("198.51.100.42"), fenced),
	}
	dnsPod1 := slice("dns", 5353, corev1.ProtocolUDP, "172.31.0.65@node")
	slices := []*discoveryv1.EndpointSlice{
		slice("web", 8080, corev1.ProtocolTCP, "172.31.0.65@node"),
		slice("local", 8080, corev1.ProtocolTCP, "172.31.0.66@node"),
		slice("remote", 8080, corev1.ProtocolTCP, "172.31.0.65@elsewhere"),
		dnsPod1,
		slice("sticky", 8080, corev1.ProtocolTCP, "172.31.0.65@node", "172.31.0.66@node"),
		slice("fenced", 8080, corev1.ProtocolTCP, "172.31.0.65@node"),
	}
	h.p.Update(svcs, slices)
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "first sync", func() error {
		if !h.p.Status().Synced {
			return errors.New("not synced")
		}
		return nil
	})

	table := map[Mode]string{ModeIPTables: "nat", ModeNFTables: "herald"}[mode]
	if got := h.metric("herald_proxy_rules", "family", "IPv4", "table", table); got < 20 {
		t.Errorf("herald_proxy_rules{family=IPv4,table=%s} = %v after the first sync; want the table's rules (20 or more)", table, got)
	}

	// Cluster policy: VIP, ClusterIP and NodePort reach pod1, masqueraded to the node.
	for _, url := range []string{"http://198.51.100.10/", "http://10.96.0.10/", "http://172.31.0.3:30080/"} {
		code, body, err := httpGet(client, url, 3*time.Second)
		if err != nil || code != http.StatusOK || body != "pod1 172.31.0.3" {
			t.Errorf("GET %s: %d %q %v; want pod1 seeing the node's address", url, code, body, err)
		}
	}

	// Local policy: the pod sees the client, and the node passes the health check.
	if code, body, err := httpGet(client, "http://198.51.100.20/", 3*time.Second); err != nil || body != "pod2 172.31.0.2" {
		t.Errorf("GET local VIP: %d %q %v; want pod2 seeing the client's address", code, body, err)
	}
	checkHealth(t, client, "http://172.31.0.3:30200/", http.StatusOK, "local", 1)
	// Local policy without a local endpoint: dropped, and the health check says 503.
	if _, body, err := httpGet(client, "http://198.51.100.21/", time.Second); err == nil {
		t.Errorf("GET remote VIP answered %q; want it dropped (no local endpoint)", body)
	}
	checkHealth(t, client, "http://172.31.0.3:30201/", http.StatusServiceUnavailable, "remote", 0)

	// ClientIP affinity: every request of the client reaches the pod of its first.
	_, first, err := httpGet(client, "http://198.51.100.40/", 3*time.Second)
	if err != nil {
		t.Fatalf("GET sticky VIP: %v", err)
	}
	for i := 0; i < 10; i++ {
		if _, body, err := httpGet(client, "http://198.51.100.40/", 3*time.Second); err != nil || body != first {
			t.Errorf("GET sticky VIP: %q %v; want %q again (ClientIP affinity)", body, err, first)
		}
	}
	// No endpoints: rejected at once. Outside the source ranges: dropped.
	if _, _, err := httpGet(client, "http://198.51.100.41/", 3*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("GET VIP without endpoints: %v; want connection refused", err)
	}
	if _, body, err := httpGet(client, "http://198.51.100.42/", time.Second); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("GET VIP from outside its source ranges: %q %v; want a timeout (dropped)", body, err)
	}

	// UDP: a flow to pod1; pod1 is replaced by pod2 and the same client socket, sending
	// again, reaches pod2 only because the proxier deleted the flow's conntrack entry.
	var conn net.PacketConn
	err = client.Do(func() error {
		var err error
		conn, err = net.ListenPacket("udp", "172.31.0.2:40053")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ask := func() (string, error) {
		if _, err := conn.WriteTo([]byte("hi"), &net.UDPAddr{IP: net.ParseIP("198.51.100.30"), Port: 53}); err != nil {
			return "", err
		}
		_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		buf := make([]byte, 64)
		n, _, err := conn.ReadFrom(buf)
		return string(buf[:n]), err
	}
	if got, err := ask(); got != "pod1" {
		t.Fatalf("UDP to the VIP: %q %v, want pod1", got, err)
	}
	slices[3] = slice("dns", 5353, corev1.ProtocolUDP, "172.31.0.66@node")
	h.p.Update(svcs, slices)
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "UDP flow moved to pod2", func() error {
		got, err := ask()
		if got != "pod2" {
			return fmt.Errorf("answer %q %v", got, err)
		}
		return nil
	})
	if mode == ModeNFTables {
		// That endpoint change rewrote one chain: it went over netlink, and the
		// answer from pod2 shows the kernel took it.
		if got := h.metric("herald_proxy_nftables_transactions_total", "family", "IPv4", "path", "netlink"); got < 1 {
			t.Errorf("herald_proxy_nftables_transactions_total{family=IPv4,path=netlink} = %v after an endpoint change; want 1 or more", got)
		}
	}
}

func checkHealth(t *testing.T, client *netlab.Host, url string, wantCode int, svc string, wantEndpoints int) {
	t.Helper()
	code, body, err := httpGet(client, url, 3*time.Second)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return
	}
	var got struct {
		Service struct {
			Namespace, Name string
		}
		LocalEndpoints      int
		ServiceProxyHealthy bool
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Errorf("GET %s: body %q: %v", url, body, err)
		return
	}
	if code != wantCode || got.Service.Namespace != "demo" || got.Service.Name != svc ||
		got.LocalEndpoints != wantEndpoints || !got.ServiceProxyHealthy {
		t.Errorf("GET %s: %d %s; want %d for demo/%s with %d local endpoints", url, code, strings.TrimSpace(body), wantCode, svc, wantEndpoints)
	}
}
