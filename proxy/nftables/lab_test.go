package nftables

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/proxy/model"
	"sigs.k8s.io/knftables"
)

// The lab: a client (.2), the node (.3) running the table, and pods from .65 (the pod
// CIDR 172.31.2.64/26) on one bridge, as in the proxy package's traffic tests.
const (
	labClient = "172.31.2.2"
	labNode   = "172.31.2.3"
)

func labHost(t *testing.T, lab *netlab.Lab, name, ip string, sysctls ...string) *netlab.Host {
	t.Helper()
	h := labtest.AddHost(t, lab, name, netip.MustParseAddr(ip))
	for _, s := range sysctls {
		if out, err := h.Exec(context.Background(), "sysctl", "-q", "-w", s); err != nil {
			t.Fatalf("sysctl %s: %v: %s", s, err, out)
		}
	}
	return h
}

// labPod answers HTTP on 8080 with its name and the client address it sees; its route
// to the client goes through the node, so replies pass the node's conntrack.
func labPod(t *testing.T, lab *netlab.Lab, name, ip string) {
	t.Helper()
	pod := labHost(t, lab, name, ip)
	if out, err := pod.Exec(context.Background(), "ip", "route", "add", labClient+"/32", "via", labNode); err != nil {
		t.Fatalf("route: %v: %s", err, out)
	}
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
}

func labGet(h *netlab.Host, url string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: h.DialContext, DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 256)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return b.String(), nil
}

// applyReal runs one Sync with the real nft in the node's namespace and commits it.
func applyReal(t *testing.T, node *netlab.Host, nft knftables.Interface, table *Table, snap *Snapshot, changed model.ServiceSet) *Update {
	t.Helper()
	u, err := table.Sync(nft.NewTransaction(), snap, changed, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Do(func() error { return nft.Run(context.Background(), u.Tx) }); err != nil {
		t.Fatalf("nft refused the transaction: %v\n%s", err, u.Tx)
	}
	u.Commit()
	return u
}

// TestRealNFTTraffic programs the table with the real nft in a namespace and sends
// traffic from the client: a Cluster-policy VIP load-balanced over two pods and
// masqueraded, a Local-policy VIP keeping the client's address, a Service without
// endpoints rejected, a source range dropping the client; then partial syncs move an
// endpoint and remove a Service.
func TestRealNFTTraffic(t *testing.T) {
	lab := labtest.NewNet(t, "hpxv-", netip.MustParsePrefix("172.31.2.0/24"))
	node := labHost(t, lab, "node", labNode, "net.ipv4.ip_forward=1",
		"net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0")
	client := labHost(t, lab, "client", labClient, "net.ipv4.conf.all.accept_redirects=0",
		"net.ipv4.conf.eth0.accept_redirects=0")
	labPod(t, lab, "pod1", "172.31.2.65")
	labPod(t, lab, "pod2", "172.31.2.66")
	for _, vip := range []string{"172.31.2.100", "172.31.2.101", "172.31.2.102", "172.31.2.103"} {
		if out, err := client.Exec(context.Background(), "ip", "neigh", "replace", vip, "lladdr", node.MAC().String(), "dev", "eth0"); err != nil {
			t.Fatalf("neigh: %v: %s", err, out)
		}
	}

	var nft knftables.Interface
	if err := node.Do(func() (err error) {
		nft, err = knftables.New(knftables.IPv4Family, TableName)
		return err
	}); err != nil {
		t.Fatalf("nft is needed (Debian package nftables): %v", err)
	}

	nodeSettings := Node{Name: "node", IPs: addrs(labNode), MasqueradeBit: DefaultMasqueradeBit,
		LocalDetector: model.LocalDetector{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("172.31.2.64/26")}}}
	cluster := lbService("ns1", "cluster", "10.96.0.10", "172.31.2.100", 30100,
		[2]string{"172.31.2.65", "node"}, [2]string{"172.31.2.66", "other"})
	local := lbService("ns1", "local", "10.96.0.11", "172.31.2.101", 30101,
		[2]string{"172.31.2.65", "node"}, [2]string{"172.31.2.66", "other"})
	local.ExternalTrafficPolicy = model.PolicyLocal
	empty := lbService("ns1", "empty", "10.96.0.12", "172.31.2.102", 30102)
	fenced := lbService("ns1", "fenced", "10.96.0.13", "172.31.2.103", 30103, [2]string{"172.31.2.65", "node"})
	fenced.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	snap := &Snapshot{Family: model.IPv4, Node: nodeSettings, Services: []model.Service{cluster, local, empty, fenced}}

	table := NewTable()
	applyReal(t, node, nft, table, snap, nil)

	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		body, err := labGet(client, "http://172.31.2.100/")
		if err != nil {
			t.Fatalf("Cluster VIP: %v", err)
		}
		pod, src, _ := strings.Cut(body, " ")
		seen[pod] = true
		if src != labNode {
			t.Errorf("Cluster VIP: the pod saw %s, want the node's %s (masqueraded)", src, labNode)
		}
	}
	if !seen["pod1"] || !seen["pod2"] {
		t.Errorf("Cluster VIP: 20 requests reached %v, want both pods", seen)
	}
	for i := 0; i < 5; i++ {
		body, err := labGet(client, "http://172.31.2.101/")
		if err != nil {
			t.Fatalf("Local VIP: %v", err)
		}
		if body != "pod1 "+labClient {
			t.Errorf("Local VIP: got %q, want the local pod1 seeing the client %s", body, labClient)
		}
	}
	if _, err := labGet(client, "http://172.31.2.102/"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("VIP without endpoints: %v, want connection refused (reject)", err)
	}
	if _, err := labGet(client, "http://172.31.2.103/"); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("VIP outside the source ranges: %v, want a timeout (dropped)", err)
	}
	if body, err := labGet(client, "http://"+labNode+":30100/"); err != nil || !strings.HasPrefix(body, "pod") {
		t.Errorf("NodePort: %q, %v", body, err)
	}

	// Partial: the Cluster Service's endpoints shrink to pod2; the empty and the fenced
	// ones go away (the fenced one's chains become stale).
	cluster2 := lbService("ns1", "cluster", "10.96.0.10", "172.31.2.100", 30100, [2]string{"172.31.2.66", "other"})
	next := &Snapshot{Family: model.IPv4, Node: nodeSettings, Services: []model.Service{cluster2, local}}
	u := applyReal(t, node, nft, table, next, model.ChangedServices(snap.Services, next.Services))
	if u.Full || u.Services != 3 {
		t.Errorf("Full %v, Services %d; want a partial sync of 3", u.Full, u.Services)
	}
	for i := 0; i < 10; i++ {
		if body, err := labGet(client, "http://172.31.2.100/"); err != nil || !strings.HasPrefix(body, "pod2 ") {
			t.Fatalf("after the partial sync: %q, %v; want pod2 only", body, err)
		}
	}
	if _, err := labGet(client, "http://172.31.2.102/"); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("removed Service: %v, want no answer any more (no reject rule, nobody owns the address)", err)
	}

	stale := nft.NewTransaction()
	if n := table.StaleChains(stale, time.Now().Add(StaleChainDelay)); n == 0 {
		t.Error("no stale chain to delete after the removal")
	}
	if err := node.Do(func() error { return nft.Run(context.Background(), stale) }); err != nil {
		t.Fatalf("deleting stale chains: %v\n%s", err, stale)
	}

	// What the kernel holds equals a fresh full sync of the same state.
	var listed string
	if err := node.Do(func() error {
		out, err := node.Exec(context.Background(), "nft", "list", "table", "ip", TableName)
		listed = string(out)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	applyReal(t, node, nft, NewTable(), next, nil)
	out, err := node.Exec(context.Background(), "nft", "list", "table", "ip", TableName)
	if err != nil {
		t.Fatal(err)
	}
	if stripHandles(listed) != stripHandles(string(out)) {
		t.Errorf("after partial syncs the kernel holds\n%s\nwant (full sync)\n%s", listed, out)
	}
}

// stripHandles drops the "# handle" annotations nft may print.
func stripHandles(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, " # handle"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
