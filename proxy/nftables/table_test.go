package nftables

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/proxy/model"
	"sigs.k8s.io/knftables"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func testNode() Node {
	return Node{Name: "node-a", IPs: addrs("192.168.0.2", "fd00::2"), MasqueradeBit: DefaultMasqueradeBit,
		LocalDetector: model.LocalDetector{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
}

// lbService is a LoadBalancer Service on port 80 with endpoints ip@node on 8080.
func lbService(ns, name, clusterIP, lbIP string, nodePort int, eps ...[2]string) model.Service {
	s := model.Service{Namespace: ns, Name: name, Type: model.LoadBalancer,
		ClusterIPs: addrs(clusterIP), LoadBalancerIPs: addrs(lbIP),
		Ports: []model.ServicePort{{Name: "http", Protocol: model.TCP, Port: 80, NodePort: nodePort}}}
	slice := model.EndpointSlice{Ports: []model.EndpointPort{{Name: "http", Protocol: model.TCP, Port: 8080}}}
	for _, e := range eps {
		slice.Endpoints = append(slice.Endpoints, model.Endpoint{IP: netip.MustParseAddr(e[0]), NodeName: e[1], Ready: true, Serving: true})
	}
	s.EndpointSlices = []model.EndpointSlice{slice}
	return s
}

// syncFake runs one Sync against fake and commits it.
func syncFake(t *testing.T, fake *knftables.Fake, table *Table, snap *Snapshot, changed model.ServiceSet, now time.Time) *Update {
	t.Helper()
	u, err := table.Sync(fake.NewTransaction(), snap, changed, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.Run(context.Background(), u.Tx); err != nil {
		t.Fatalf("transaction refused: %v\n%s", err, u.Tx)
	}
	u.Commit()
	if want := strings.Count(fake.Dump(), "\nadd rule "); table.Rules() != want {
		t.Errorf("Rules() = %d after the sync, the table holds %d", table.Rules(), want)
	}
	return u
}

func TestFullSyncRules(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	snap := &Snapshot{Family: model.IPv4, Node: testNode(), Services: []model.Service{
		lbService("ns1", "web", "172.30.0.41", "1.2.3.4", 30080, [2]string{"10.180.0.1", "node-a"}, [2]string{"10.180.0.2", "node-b"}),
		lbService("ns1", "empty", "172.30.0.42", "1.2.3.5", 30081),
	}}
	u := syncFake(t, fake, NewTable(), snap, nil, time.Unix(0, 0))
	if !u.Full {
		t.Error("first sync not full")
	}
	dump := fake.Dump()
	web := portNameBase("ns1", "web", "tcp", "http")
	for _, want := range []string{
		"add element ip herald service-ips { 172.30.0.41 . tcp . 80 : goto service-" + web + " }",
		"add element ip herald service-ips { 1.2.3.4 . tcp . 80 : goto external-" + web + " }",
		"add element ip herald service-nodeports { tcp . 30080 : goto external-" + web + " }",
		"add rule ip herald service-" + web + " numgen random mod 2 0 meta l4proto tcp dnat to 10.180.0.1:8080",
		"add rule ip herald service-" + web + " meta l4proto tcp dnat to 10.180.0.2:8080",
		"add rule ip herald external-" + web + " mark set mark or 0x00004000 comment \"masquerade\"",
		"add element ip herald hairpin-connections { 10.180.0.1 . 10.180.0.1 . tcp . 8080 }",
		"add element ip herald no-endpoint-services { 172.30.0.42 . tcp . 80 comment \"ns1/empty:http\" : goto reject-chain }",
		"add element ip herald no-endpoint-nodeports { tcp . 30081 comment \"ns1/empty:http\" : goto reject-chain }",
		"add rule ip herald services ip daddr @cluster-ips ip saddr != 10.0.0.0/8 mark set mark or 0x00004000 comment \"masquerade clusterIP traffic from outside cluster\"",
	} {
		if !strings.Contains(dump, want+"\n") {
			t.Errorf("missing %q in\n%s", want, dump)
		}
	}
}

// A partial sync after one endpoint changed touches that service's policy chain and
// nothing of the other services.
func TestPartialSyncTouchesOnlyTheChange(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	table := NewTable()
	services := []model.Service{
		lbService("ns1", "a", "172.30.0.1", "1.2.3.1", 30001, [2]string{"10.180.0.1", "node-a"}),
		lbService("ns1", "b", "172.30.0.2", "1.2.3.2", 30002, [2]string{"10.180.0.2", "node-b"}),
	}
	snap := &Snapshot{Family: model.IPv4, Node: testNode(), Services: services}
	syncFake(t, fake, table, snap, nil, time.Unix(0, 0))

	next := &Snapshot{Family: model.IPv4, Node: testNode(), Services: []model.Service{
		services[0],
		lbService("ns1", "b", "172.30.0.2", "1.2.3.2", 30002, [2]string{"10.180.0.2", "node-b"}, [2]string{"10.180.0.3", "node-c"}),
	}}
	u := syncFake(t, fake, table, next, model.ChangedServices(snap.Services, next.Services), time.Unix(1, 0))
	if u.Full || u.Services != 1 {
		t.Fatalf("Full %v, Services %d; want a partial sync of 1", u.Full, u.Services)
	}
	tx := u.Tx.String()
	b, a := portNameBase("ns1", "b", "tcp", "http"), portNameBase("ns1", "a", "tcp", "http")
	if !strings.Contains(tx, "flush chain ip herald service-"+b) || !strings.Contains(tx, "dnat to 10.180.0.3:8080") {
		t.Errorf("b's policy chain not rewritten:\n%s", tx)
	}
	if strings.Contains(tx, a) || strings.Contains(tx, "external-"+b) || strings.Contains(tx, "element") {
		t.Errorf("partial sync touches more than b's policy chain:\n%s", tx)
	}

	// The same result as a full sync of the new snapshot.
	full := knftables.NewFake(knftables.IPv4Family, TableName)
	syncFake(t, full, NewTable(), next, nil, time.Unix(0, 0))
	if got, want := fake.Dump(), full.Dump(); got != want {
		t.Errorf("partial result differs from a full sync:\n%s\nwant\n%s", got, want)
	}
}

// A removed service's chains are flushed at once and deleted a StaleChainDelay later.
func TestRemovedServiceChains(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	table := NewTable()
	svc := lbService("ns1", "a", "172.30.0.1", "1.2.3.1", 30001, [2]string{"10.180.0.1", "node-a"})
	svc.SessionAffinityClientIP = true
	snap := &Snapshot{Family: model.IPv4, Node: testNode(), Services: []model.Service{svc}}
	syncFake(t, fake, table, snap, nil, time.Unix(0, 0))
	empty := &Snapshot{Family: model.IPv4, Node: testNode()}
	syncFake(t, fake, table, empty, model.ChangedServices(snap.Services, nil), time.Unix(10, 0))
	chains, _ := fake.List(context.Background(), "chains")
	if n := countServiceChains(chains); n != 3 { // external, service, endpoint: flushed, not deleted
		t.Errorf("after removal: %d service chains, want 3 flushed ones: %v", n, chains)
	}
	sets, _ := fake.List(context.Background(), "sets")
	for _, s := range sets {
		if strings.HasPrefix(s, prefixAffinity) {
			t.Errorf("affinity set %s not deleted", s)
		}
	}
	tx := fake.NewTransaction()
	if n := table.StaleChains(tx, time.Unix(10, 5e8)); n != 0 {
		t.Errorf("%d chains deleted before the delay", n)
	}
	if n := table.StaleChains(tx, time.Unix(11, 0)); n != 3 {
		t.Errorf("%d stale chains deleted, want 3", n)
	}
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	chains, _ = fake.List(context.Background(), "chains")
	if n := countServiceChains(chains); n != 0 {
		t.Errorf("stale chains left: %v", chains)
	}
	full := knftables.NewFake(knftables.IPv4Family, TableName)
	syncFake(t, full, NewTable(), empty, nil, time.Unix(0, 0))
	if got, want := fake.Dump(), full.Dump(); got != want {
		t.Errorf("after removal differs from a full sync:\n%s\nwant\n%s", got, want)
	}
}

func countServiceChains(chains []string) int {
	n := 0
	for _, c := range chains {
		if IsServiceChain(c) {
			n++
		}
	}
	return n
}

// A port of a Service without endpoints renamed changes only its elements' comments;
// they are replaced, since nft's add of an existing element would keep the old comment.
func TestRenamedPortReplacesElementComments(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	table := NewTable()
	svc := lbService("ns1", "a", "172.30.0.1", "1.2.3.1", 30001)
	snap := &Snapshot{Family: model.IPv4, Node: testNode(), Services: []model.Service{svc}}
	syncFake(t, fake, table, snap, nil, time.Unix(0, 0))

	renamed := lbService("ns1", "a", "172.30.0.1", "1.2.3.1", 30001)
	renamed.Ports[0].Name, renamed.EndpointSlices[0].Ports[0].Name = "web", "web"
	next := &Snapshot{Family: model.IPv4, Node: testNode(), Services: []model.Service{renamed}}
	u := syncFake(t, fake, table, next, model.ChangedServices(snap.Services, next.Services), time.Unix(1, 0))
	tx := u.Tx.String()
	for _, want := range []string{
		"delete element ip herald no-endpoint-services { 172.30.0.1 . tcp . 80 }",
		`add element ip herald no-endpoint-services { 172.30.0.1 . tcp . 80 comment "ns1/a:web" : goto reject-chain }`,
		`add element ip herald no-endpoint-nodeports { tcp . 30001 comment "ns1/a:web" : goto reject-chain }`,
	} {
		if !strings.Contains(tx, want) {
			t.Errorf("renaming the port does not write %q:\n%s", want, tx)
		}
	}
}
