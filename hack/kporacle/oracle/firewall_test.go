//go:build linux

package oracle

import (
	"fmt"
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// svc5 is ns5/svc5 of kube-proxy's TestOverallIPTablesRules: an ETP=Cluster
// LB with a source range (with the stray space the test uses), ClientIP
// affinity and a healthCheckNodePort that ETP=Cluster ignores.
func svc5(sourceRange string) *v1.Service {
	svc := lbService("ns5", "svc5", "172.30.0.45", "5.6.7.8", 3002, v1.ServiceExternalTrafficPolicyCluster)
	svc.Spec.HealthCheckNodePort = 30000
	svc.Spec.LoadBalancerSourceRanges = []string{sourceRange}
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{
		ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)},
	}
	return svc
}

// TestSourceRangesAndAffinity runs svc5 with the settings of kube-proxy's
// unit-test fixture (localhost NodePorts and nfacct on, no --random-fully)
// and compares with TestOverallIPTablesRules' expected svc5 rules.
func TestSourceRangesAndAffinity(t *testing.T) {
	opts := workedExampleOptions()
	opts.DisableLocalhostNodePorts = false
	o := newOracle(t, opts)
	o.OnServiceAdd(svc5(" 203.0.113.0/25"))
	o.OnEndpointSliceAdd(slice("ns5", "svc5", discoveryv1.AddressTypeIPv4, endpoint{"10.180.0.3", ""}))
	result := mustSync(t, o, true)

	assertText(t, "canonical payload", canonical(t, result.Payload), lines(
		`*filter`,
		`:KUBE-NODEPORTS - [0:0]`,
		`:KUBE-SERVICES - [0:0]`,
		`:KUBE-EXTERNAL-SERVICES - [0:0]`,
		`:KUBE-FIREWALL - [0:0]`,
		`:KUBE-FORWARD - [0:0]`,
		`:KUBE-PROXY-FIREWALL - [0:0]`,
		`-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
		filterForwardRules[0], filterForwardRules[1], filterForwardRules[2],
		`-A KUBE-PROXY-FIREWALL -m comment --comment "ns5/svc5:p80 traffic not accepted by KUBE-FW-NUKIZ6OKUXPJNT4C" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j DROP`,
		`COMMIT`,
		`*nat`,
		`:KUBE-NODEPORTS - [0:0]`,
		`:KUBE-SERVICES - [0:0]`,
		`:KUBE-EXT-NUKIZ6OKUXPJNT4C - [0:0]`,
		`:KUBE-FW-NUKIZ6OKUXPJNT4C - [0:0]`,
		`:KUBE-MARK-MASQ - [0:0]`,
		`:KUBE-POSTROUTING - [0:0]`,
		`:KUBE-SEP-I77PXRDZVX7PMWMN - [0:0]`,
		`:KUBE-SVC-NUKIZ6OKUXPJNT4C - [0:0]`,
		`-A KUBE-NODEPORTS -m comment --comment ns5/svc5:p80 -m tcp -p tcp -d 127.0.0.0/8 --dport 3002 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j KUBE-EXT-NUKIZ6OKUXPJNT4C`,
		`-A KUBE-NODEPORTS -m comment --comment ns5/svc5:p80 -m tcp -p tcp --dport 3002 -j KUBE-EXT-NUKIZ6OKUXPJNT4C`,
		`-A KUBE-SERVICES -m comment --comment "ns5/svc5:p80 cluster IP" -m tcp -p tcp -d 172.30.0.45 --dport 80 -j KUBE-SVC-NUKIZ6OKUXPJNT4C`,
		`-A KUBE-SERVICES -m comment --comment "ns5/svc5:p80 loadbalancer IP" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j KUBE-FW-NUKIZ6OKUXPJNT4C`,
		`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
		`-A KUBE-EXT-NUKIZ6OKUXPJNT4C -m comment --comment "masquerade traffic for ns5/svc5:p80 external destinations" -j KUBE-MARK-MASQ`,
		`-A KUBE-EXT-NUKIZ6OKUXPJNT4C -j KUBE-SVC-NUKIZ6OKUXPJNT4C`,
		`-A KUBE-FW-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 loadbalancer IP" -s 203.0.113.0/25 -j KUBE-EXT-NUKIZ6OKUXPJNT4C`,
		`-A KUBE-FW-NUKIZ6OKUXPJNT4C -m comment --comment "other traffic to ns5/svc5:p80 will be dropped by KUBE-PROXY-FIREWALL"`,
		natMasqueradeRules[3], natMasqueradeRules[0], natMasqueradeRules[1], natMasqueradeRules[2],
		`-A KUBE-SEP-I77PXRDZVX7PMWMN -m comment --comment ns5/svc5:p80 -s 10.180.0.3 -j KUBE-MARK-MASQ`,
		`-A KUBE-SEP-I77PXRDZVX7PMWMN -m comment --comment ns5/svc5:p80 -m recent --name KUBE-SEP-I77PXRDZVX7PMWMN --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80`,
		`-A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 cluster IP" -m tcp -p tcp -d 172.30.0.45 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ`,
		`-A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 -> 10.180.0.3:80" -m recent --name KUBE-SEP-I77PXRDZVX7PMWMN --rcheck --seconds 10800 --reap -j KUBE-SEP-I77PXRDZVX7PMWMN`,
		`-A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 -> 10.180.0.3:80" -j KUBE-SEP-I77PXRDZVX7PMWMN`,
		`COMMIT`,
	))
}

// A source range holding the primary node IP lets node traffic that loops
// back with the LB IP as source through (Options.NodeIPs reaches NewProxier).
func TestSourceRangeContainingNodeIP(t *testing.T) {
	o := newOracle(t, workedExampleOptions())
	o.OnServiceAdd(svc5("192.168.0.0/24"))
	o.OnEndpointSliceAdd(slice("ns5", "svc5", discoveryv1.AddressTypeIPv4, endpoint{"10.180.0.3", ""}))
	result := mustSync(t, o, true)

	const want = `-A KUBE-FW-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 loadbalancer IP" -s 5.6.7.8 -j KUBE-EXT-NUKIZ6OKUXPJNT4C`
	if !strings.Contains(result.NAT, want+"\n") {
		t.Errorf("nat payload lacks %q:\n%s", want, result.NAT)
	}
}

// The oracle must not open healthCheckNodePorts as kube-proxy's real
// health-check server does.
func TestHealthCheckNodePortOpensNoListener(t *testing.T) {
	port := freeTCPPort(t)
	o := newOracle(t, workedExampleOptions())
	svc := lbService("ns1", "svc1", "172.30.0.41", "1.2.3.4", 3001, v1.ServiceExternalTrafficPolicyLocal)
	svc.Spec.HealthCheckNodePort = int32(port)
	o.OnServiceAdd(svc)
	o.OnEndpointSliceAdd(svc1LocalOnly())
	result := mustSync(t, o, true)

	want := fmt.Sprintf(`-A KUBE-NODEPORTS -m comment --comment "ns1/svc1:p80 health check node port" -m tcp -p tcp --dport %d -j ACCEPT`, port)
	if !strings.Contains(result.Filter, want+"\n") {
		t.Errorf("filter payload lacks %q:\n%s", want, result.Filter)
	}
	listener, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatalf("healthCheckNodePort %d is taken after the sync: %v", port, err)
	}
	listener.Close()
}

// freeTCPPort returns a TCP port nobody listens on right now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	listener, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port
}
