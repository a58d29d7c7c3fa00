package iptables

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"herald.dev/herald/proxy/model"
)

// go test ./proxy/iptables/ -update rewrites testdata/<scenario>.golden from the current
// generator, and testdata/<scenario>.json with the scenario's input. Review the diff:
// goldens are the exact restore input, in emission order. The JSON files let a separate
// module replay the same inputs through kube-proxy's own proxier and compare.
var update = flag.Bool("update", false, "rewrite testdata/*.golden and testdata/*.json")

// goldenStep is one sync of a scenario. Steps after the first are partial syncs of the
// services that changed, unless Full.
type goldenStep struct {
	Full     bool
	Snapshot *Snapshot
}

type goldenScenario struct {
	name  string
	steps []goldenStep
}

func one(name string, snap *Snapshot) goldenScenario {
	return goldenScenario{name: name, steps: []goldenStep{{Full: true, Snapshot: snap}}}
}

func goldenScenarios() []goldenScenario {
	node := testNode()
	local := func(s *model.Service) { s.ExternalTrafficPolicy = model.PolicyLocal }
	internalLocal := func(s *model.Service) { s.InternalTrafficPolicy = model.PolicyLocal }
	nodePort := func(port int) func(*model.Service) {
		return func(s *model.Service) { s.Type, s.Ports[0].NodePort = model.NodePort, port }
	}
	hcnp := func(port int) func(*model.Service) { return func(s *model.Service) { s.HealthCheckNodePort = port } }

	var out []goldenScenario

	out = append(out, one("clusterip", snapshot(model.IPv4, node,
		service("ns1", "three", "172.30.0.41", endpoints(
			ready("10.180.0.2", ""), ready("10.180.0.10", testNodeName), ready("10.180.1.1", "other"))),
		service("ns1", "unnamed", "172.30.0.42", func(s *model.Service) {
			s.Ports[0].Name, s.Ports[0].Port = "", 443
		}, endpointsOn("", model.TCP, 8443, ready("10.180.0.3", ""))),
		service("ns1", "empty", "172.30.0.43"),
		service("ns1", "headless", "172.30.0.44", func(s *model.Service) { s.ClusterIPs = nil }, endpoints(ready("10.180.0.4", ""))),
		service("ns1", "external-name", "172.30.0.45", func(s *model.Service) { s.Type = model.ExternalName }),
	)))

	out = append(out, one("nodeport", snapshot(model.IPv4, node,
		service("ns1", "cluster", "172.30.0.51", nodePort(30051), endpoints(ready("10.180.0.1", ""), ready("10.180.1.1", "other"))),
		// ETP=Local on a NodePort service: no health check port (LoadBalancer only).
		service("ns1", "local", "172.30.0.52", nodePort(30052), local, hcnp(30152),
			endpoints(ready("10.180.0.2", testNodeName), ready("10.180.1.2", "other"))),
	)))
	out = append(out, one("nodeport-localhost", snapshot(model.IPv4, fakeProxierNode(),
		service("ns1", "cluster", "172.30.0.51", nodePort(30051), endpoints(ready("10.180.0.1", ""))),
	)))

	out = append(out, one("loadbalancer-etp-cluster", snapshot(model.IPv4, node,
		service("ns1", "lb", "172.30.0.61", loadBalancer(30061, "1.2.3.4", "5.6.7.8"), hcnp(30161),
			endpoints(ready("10.180.0.1", testNodeName), ready("10.180.1.1", "other"))),
	)))
	out = append(out, one("loadbalancer-etp-local", snapshot(model.IPv4, node,
		service("ns1", "lb", "172.30.0.62", loadBalancer(30062, "1.2.3.4"), local, hcnp(30162),
			endpoints(ready("10.180.0.1", testNodeName), ready("10.180.0.2", testNodeName), ready("10.180.1.1", "other"))),
	)))
	out = append(out, one("loadbalancer-etp-local-no-local-endpoints", snapshot(model.IPv4, node,
		service("ns1", "lb", "172.30.0.63", loadBalancer(30063, "1.2.3.4"), local, hcnp(30163), func(s *model.Service) {
			s.ExternalIPs = addrs("192.168.99.11")
		}, endpoints(ready("10.180.1.1", "other"))),
	)))

	out = append(out, one("source-ranges", snapshot(model.IPv4, node,
		// 192.168.0.0/24 holds the node IP, so node-originated traffic looping back
		// from the VIPs is allowed too. The IPv6 range is ignored by the IPv4 proxier.
		service("ns1", "allow-node", "172.30.0.71", loadBalancer(30071, "1.2.3.4", "5.6.7.8"), func(s *model.Service) {
			s.LoadBalancerSourceRanges = prefixes("203.0.113.7/25", "192.168.0.0/24", "2001:db8::/32")
		}, endpoints(ready("10.180.0.1", ""))),
		service("ns1", "local", "172.30.0.72", loadBalancer(30072, "1.2.3.5"), local, hcnp(30172), func(s *model.Service) {
			s.LoadBalancerSourceRanges = prefixes("203.0.113.0/25")
		}, endpoints(ready("10.180.1.1", "other"))),
		// A zero-length range allows everything: no firewall chain.
		service("ns1", "open", "172.30.0.73", loadBalancer(30073, "1.2.3.6"), func(s *model.Service) {
			s.LoadBalancerSourceRanges = prefixes("0.0.0.0/0", "203.0.113.0/25")
		}, endpoints(ready("10.180.0.3", ""))),
	)))

	out = append(out, one("affinity", snapshot(model.IPv4, node,
		service("ns1", "sticky", "172.30.0.81", loadBalancer(30081, "1.2.3.4"), local, hcnp(30181), func(s *model.Service) {
			s.SessionAffinityClientIP, s.AffinityTimeoutSeconds = true, 600
		}, endpoints(ready("10.180.0.1", testNodeName), ready("10.180.1.1", "other"), ready("10.180.2.1", "other"))),
		service("ns1", "default-timeout", "172.30.0.82", func(s *model.Service) { s.SessionAffinityClientIP = true },
			endpoints(ready("10.180.0.2", ""))),
	)))

	out = append(out, one("no-endpoints", snapshot(model.IPv4, node,
		service("ns1", "reject", "172.30.0.91", loadBalancer(30091, "1.2.3.4"), func(s *model.Service) {
			s.ExternalIPs = addrs("192.168.99.11")
			s.LoadBalancerSourceRanges = prefixes("203.0.113.0/25")
		}),
		// Endpoints that are neither ready nor serving-and-terminating do not count.
		service("ns1", "not-ready", "172.30.0.92", nodePort(30092), endpoints(
			model.Endpoint{IP: addr("10.180.0.1"), NodeName: testNodeName}, terminating("10.180.0.2", testNodeName, false))),
		// Endpoints for another port name do not count either.
		service("ns1", "wrong-port", "172.30.0.93", endpointsOn("http", model.TCP, 80, ready("10.180.0.3", ""))),
	)))

	// The same ip:port in two slices (a pod IP reused while the old pod terminates):
	// the non-terminating copy wins, whichever slice comes first.
	out = append(out, one("duplicate-endpoints", snapshot(model.IPv4, node,
		service("ns1", "reused-first", "172.30.0.95",
			endpoints(terminating("10.180.0.5", "other", true), ready("10.180.0.6", "other")),
			endpoints(ready("10.180.0.5", testNodeName))),
		service("ns1", "reused-last", "172.30.0.96", local, nodePort(30096),
			endpoints(ready("10.180.0.7", testNodeName)),
			endpoints(terminating("10.180.0.7", "other", true), ready("10.180.0.8", "other"))),
	)))

	term := func(name, ip string, policy model.TrafficPolicy, eps ...model.Endpoint) model.Service {
		return service("ns1", name, ip, loadBalancer(0, "1.2.3.5"), func(s *model.Service) {
			s.ExternalTrafficPolicy = policy
		}, endpoints(eps...))
	}
	out = append(out, one("terminating", snapshot(model.IPv4, node,
		// Ready endpoints exist: terminating ones are ignored.
		term("ready-and-terminating", "172.30.1.1", model.PolicyLocal, ready("10.0.1.1", testNodeName),
			terminating("10.0.1.2", testNodeName, true), ready("10.0.1.3", "other"), terminating("10.0.1.4", "other", true)),
		// Only the local set falls back to terminating endpoints.
		term("local-terminating", "172.30.1.2", model.PolicyLocal, terminating("10.0.2.1", testNodeName, true),
			terminating("10.0.2.2", testNodeName, false), ready("10.0.2.3", "other")),
		// Both sets fall back.
		term("all-terminating", "172.30.1.3", model.PolicyLocal, terminating("10.0.3.1", testNodeName, true),
			terminating("10.0.3.2", "other", true)),
		term("cluster-terminating", "172.30.1.4", model.PolicyCluster, terminating("10.0.4.1", testNodeName, true),
			terminating("10.0.4.2", "other", true), terminating("10.0.4.3", "other", false)),
		// Terminating and not serving: nothing usable.
		term("none-serving", "172.30.1.5", model.PolicyLocal, terminating("10.0.5.1", testNodeName, false)),
	)))

	out = append(out, one("itp-local", snapshot(model.IPv4, node,
		service("ns1", "local", "172.30.2.1", internalLocal,
			endpoints(ready("10.0.1.1", testNodeName), ready("10.0.1.2", "other"))),
		service("ns1", "none-local", "172.30.2.2", internalLocal, endpoints(ready("10.0.2.1", "other"))),
		// Internal Local with external Cluster: KUBE-SVL for the ClusterIP, KUBE-SVC
		// behind KUBE-EXT.
		service("ns1", "nodeport", "172.30.2.3", internalLocal, nodePort(30203),
			endpoints(ready("10.0.3.1", testNodeName), ready("10.0.3.2", "other"))),
		service("ns1", "nodeport-none-local", "172.30.2.4", internalLocal, nodePort(30204),
			endpoints(ready("10.0.4.1", "other"))),
		service("ns1", "both-local", "172.30.2.5", internalLocal, local, nodePort(30205),
			endpoints(ready("10.0.5.1", testNodeName), ready("10.0.5.2", "other"))),
	)))

	out = append(out, one("externalips", snapshot(model.IPv4, node,
		service("ns1", "cluster", "172.30.3.1", func(s *model.Service) {
			s.ExternalIPs = addrs("192.168.99.11", "192.168.99.12", "2001:db8::1")
		}, endpoints(ready("10.0.1.1", ""))),
		// ETP=Local applies to a ClusterIP service with externalIPs.
		service("ns1", "local", "172.30.3.2", local, func(s *model.Service) {
			s.ExternalIPs = addrs("192.168.99.13")
		}, endpoints(ready("10.0.2.1", testNodeName), ready("10.0.2.2", "other"))),
		// ...but not to one without: the policy is ignored.
		service("ns1", "local-ignored", "172.30.3.3", local, endpoints(ready("10.0.3.1", "other"))),
	)))

	dual := service("ns1", "dual", "fd00:30::41", loadBalancer(30401, "2001:db8::99", "1.2.3.4"), local, hcnp(30501), func(s *model.Service) {
		s.ClusterIPs = addrs("fd00:30::41", "172.30.4.1")
		s.ExternalIPs = addrs("2001:db8::11", "192.168.99.11")
		s.LoadBalancerSourceRanges = prefixes("2001:db8::/64", "fd00::/64", "203.0.113.0/25")
	}, endpoints(ready("fd00:10::1", testNodeName), ready("fd00:10::2", "other"), ready("10.0.4.1", testNodeName)))
	v6affinity := service("ns1", "v6", "fd00:30::42", func(s *model.Service) { s.SessionAffinityClientIP = true },
		endpoints(ready("fd00:10::10", ""), ready("fd00:10::9", "")))
	out = append(out, one("ipv6", snapshot(model.IPv6, node, dual, v6affinity)))
	out = append(out, one("dual-stack-ipv4", snapshot(model.IPv4, node, dual, v6affinity)))

	out = append(out, one("multiport-udp-sctp", snapshot(model.IPv4, node,
		service("kube-system", "dns", "10.96.0.10", func(s *model.Service) {
			s.Type = model.NodePort
			s.Ports = []model.ServicePort{
				{Name: "dns", Protocol: model.UDP, Port: 53, NodePort: 30053},
				{Name: "dns-tcp", Protocol: model.TCP, Port: 53, NodePort: 30054},
				{Name: "sctp", Protocol: model.SCTP, Port: 9999},
			}
			s.EndpointSlices = []model.EndpointSlice{{
				Ports: []model.EndpointPort{{Name: "dns", Protocol: model.UDP, Port: 5353}, {Name: "dns-tcp", Protocol: model.TCP, Port: 5353},
					{Name: "sctp", Protocol: model.SCTP, Port: 9999}},
				Endpoints: []model.Endpoint{ready("10.244.1.2", "a"), ready("10.244.2.2", "b"), ready("10.244.1.10", testNodeName)},
			}, {
				Ports:     []model.EndpointPort{{Name: "dns", Protocol: model.UDP, Port: 5353}},
				Endpoints: []model.Endpoint{ready("10.244.3.1", "c")},
			}}
		}),
	)))

	variants := []struct {
		name string
		edit func(*Node)
	}{
		{"masquerade-all", func(n *Node) { n.MasqueradeAll = true }},
		{"no-local-detector", func(n *Node) { n.LocalDetector = model.LocalDetector{} }},
		{"bridge-detector", func(n *Node) { n.LocalDetector = model.LocalDetector{BridgeInterface: "cbr0"} }},
		{"interface-prefix-detector", func(n *Node) { n.LocalDetector = model.LocalDetector{InterfaceNamePrefix: "veth"} }},
		{"random-fully-bit3-liberal", func(n *Node) { n.RandomFully, n.MasqueradeBit, n.ConntrackTCPLiberal = true, 3, true }},
		{"nodeport-addresses", func(n *Node) {
			n.LocalhostNodePorts = true
			n.NodePortAddresses = prefixes("127.0.0.0/8", "192.168.0.0/16", "fd00::/8")
			n.InterfaceAddrs = addrs("127.0.0.1", "192.168.0.2", "10.1.2.3", "::1", "fd00::2", "192.168.0.2")
		}},
	}
	for _, v := range variants {
		n := testNode()
		v.edit(&n)
		out = append(out, one("node-"+v.name, snapshot(model.IPv4, n, overallServices()...)))
	}

	zoned := testNode()
	zoned.Zone = "zone-a"
	hinted := func(ip, node string, zones ...string) model.Endpoint {
		e := ready(ip, node)
		e.ZoneHints = zones
		return e
	}
	out = append(out, one("topology-hints", snapshot(model.IPv4, zoned,
		service("ns1", "zone", "172.30.5.1", endpoints(hinted("10.0.1.1", "a", "zone-a"), hinted("10.0.1.2", "b", "zone-b"),
			hinted("10.0.1.3", "c", "zone-a"))),
		// One endpoint without hints: hints are ignored.
		service("ns1", "partial-hints", "172.30.5.2", endpoints(hinted("10.0.2.1", "a", "zone-a"), ready("10.0.2.2", "b"))),
		// Local policy plus hints: the endpoint chains are the union of both sets.
		service("ns1", "local", "172.30.5.3", nodePort(30503), local, endpoints(hinted("10.0.3.1", "a", "zone-a"),
			hinted("10.0.3.2", testNodeName, "zone-b"), hinted("10.0.3.3", "c", "zone-b"))),
	)))

	small := testNode()
	small.LargeClusterEndpoints = 3
	out = append(out, one("large-cluster-mode", snapshot(model.IPv4, small,
		service("ns1", "a", "172.30.6.1", endpoints(ready("10.0.1.1", ""), ready("10.0.1.2", ""))),
		service("ns1", "b", "172.30.6.2", func(s *model.Service) { s.SessionAffinityClientIP = true },
			endpoints(ready("10.0.2.1", ""), ready("10.0.2.2", ""))),
	)))

	lb := func(eps ...model.Endpoint) model.Service {
		return service("ns1", "lb", "172.30.7.1", loadBalancer(30701, "1.2.3.4"), local, hcnp(30801), func(s *model.Service) {
			s.LoadBalancerSourceRanges = prefixes("203.0.113.0/25")
		}, endpoints(eps...))
	}
	other := service("ns1", "other", "172.30.7.2", endpoints(ready("10.0.2.1", "")))
	out = append(out, goldenScenario{name: "partial-syncs", steps: []goldenStep{
		{Full: true, Snapshot: snapshot(model.IPv4, node, lb(ready("10.0.1.1", "other")), other)},
		// A local endpoint appears: KUBE-SVL and its jump; "other" is not rewritten.
		{Snapshot: snapshot(model.IPv4, node, lb(ready("10.0.1.1", "other"), ready("10.0.1.2", testNodeName)), other)},
		// The remote one starts terminating and is dropped.
		{Snapshot: snapshot(model.IPv4, node, lb(terminating("10.0.1.1", "other", true), ready("10.0.1.2", testNodeName)), other)},
		// Nothing changed.
		{Snapshot: snapshot(model.IPv4, node, lb(terminating("10.0.1.1", "other", true), ready("10.0.1.2", testNodeName)), other)},
		// All endpoints gone: REJECT, and every per-service chain is deleted.
		{Snapshot: snapshot(model.IPv4, node, lb(), other)},
	}})
	return out
}

func TestGolden(t *testing.T) {
	for _, sc := range goldenScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			var got bytes.Buffer
			table := natTable{}
			var prev *Snapshot
			for i, step := range sc.steps {
				opts := Options{ExistingNATChains: table.chains()}
				if !step.Full {
					opts.Changed = ChangedServices(prev, step.Snapshot)
				}
				p := mustGenerate(t, step.Snapshot, opts)
				if len(p.Problems) > 0 {
					t.Errorf("step %d: unexpected problems: %v", i, p.Problems)
				}
				checkStructure(t, p, table)
				again := mustGenerate(t, step.Snapshot, opts)
				if !bytes.Equal(again.Bytes(), p.Bytes()) {
					t.Errorf("step %d: output is not deterministic", i)
				}
				kind := "full"
				if p.Partial {
					kind = "partial"
				}
				fmt.Fprintf(&got, "# step %d: %s sync, filter %d rules, nat %d rules written + %d kept, deleted %v\n",
					i, kind, p.Filter.Rules, p.NAT.Rules, p.SkippedNATRules, p.DeletedNATChains)
				got.Write(p.Bytes())
				table.apply(p)
				prev = step.Snapshot
			}
			compareGolden(t, sc, got.Bytes())
		})
	}
}

func compareGolden(t *testing.T, sc goldenScenario, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", sc.name+".golden")
	if *update {
		input, err := json.MarshalIndent(sc.steps, "", "  ")
		if err != nil {
			t.Fatalf("encode input: %v", err)
		}
		if err := os.WriteFile(filepath.Join("testdata", sc.name+".json"), append(input, '\n'), 0o644); err != nil {
			t.Fatalf("write input: %v", err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("write golden: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s; %s\n--- got:\n%s", path, diffLines(string(want), string(got)), got)
	}
}

// TestGoldenInputsRoundTrip checks that the JSON inputs written next to the goldens
// decode to the snapshots that produced them, so replaying them elsewhere is faithful.
func TestGoldenInputsRoundTrip(t *testing.T) {
	for _, sc := range goldenScenarios() {
		data, err := json.Marshal(sc.steps)
		if err != nil {
			t.Fatalf("%s: encode: %v", sc.name, err)
		}
		var back []goldenStep
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s: decode: %v", sc.name, err)
		}
		for i := range back {
			a := mustGenerate(t, sc.steps[i].Snapshot, Options{})
			b := mustGenerate(t, back[i].Snapshot, Options{})
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Errorf("%s step %d: JSON round trip changes the output", sc.name, i)
			}
		}
	}
}
