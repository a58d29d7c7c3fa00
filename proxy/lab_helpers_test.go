package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/testkit"
)

// TestMain checks that no test touched the machine's own iptables: every test works in
// network namespaces of its own, and this is the proof.
func TestMain(m *testing.M) {
	before := rootRules()
	code := m.Run()
	if after := rootRules(); after != before {
		fmt.Fprintf(os.Stderr, "FAIL: the root namespace's iptables changed during the tests\nbefore:\n%s\nafter:\n%s\n", before, after)
		code = 1
	}
	os.Exit(code)
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// rootRules is the root namespace's iptables and ip6tables rules without comments and
// counters, and its nftables table names ("" where the commands are missing or not
// allowed).
func rootRules() string {
	var b strings.Builder
	if out, err := exec.Command("nft", "list", "tables").Output(); err == nil {
		b.Write(out)
	}
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(cmd).Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, "#") {
				b.WriteString(counters.ReplaceAllString(line, "") + "\n")
			}
		}
	}
	return b.String()
}

// labSubnet holds a client (.2), the node (.3) and pods from .65 (the cluster CIDR
// 172.31.0.64/26), all on one bridge. The node forwards, and neither sends nor takes
// ICMP redirects: with pods on the same segment as the client, a redirect would teach
// the client to send VIP traffic to a pod.
var labSubnet = netip.MustParsePrefix("172.31.0.0/24")

// newLab builds a lab on labSubnet (labtest.NewNet).
func newLab(t testing.TB, prefix string) *netlab.Lab { return labtest.NewNet(t, prefix, labSubnet) }

const (
	clusterCIDR = "172.31.0.64/26"
	nodeName    = "node"
)

func addHost(t testing.TB, lab *netlab.Lab, name, ip string, sysctls ...string) *netlab.Host {
	t.Helper()
	h := labtest.AddHost(t, lab, name, netip.MustParseAddr(ip))
	for _, s := range sysctls {
		mustExec(t, h, "sysctl", "-q", "-w", s)
	}
	return h
}

func addNode(t testing.TB, lab *netlab.Lab) *netlab.Host {
	return addHost(t, lab, nodeName, "172.31.0.3", "net.ipv4.ip_forward=1",
		"net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0")
}

func addClient(t testing.TB, lab *netlab.Lab) *netlab.Host {
	return addHost(t, lab, "client", "172.31.0.2", "net.ipv4.conf.all.accept_redirects=0",
		"net.ipv4.conf.eth0.accept_redirects=0")
}

func mustExec(t testing.TB, h *netlab.Host, args ...string) string {
	t.Helper()
	out, err := h.Exec(context.Background(), args...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// harness runs a Proxier in the node's namespace.
type harness struct {
	t   testing.TB
	p   *Proxier
	reg *prometheus.Registry
}

// startProxier runs a Proxier in the node's namespace until the test ends.
func startProxier(t testing.TB, node *netlab.Host, edit func(*Config)) *harness {
	t.Helper()
	h := newProxier(t, node, edit)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

// newProxier makes a Proxier for the node's namespace without running it.
func newProxier(t testing.TB, node *netlab.Host, edit func(*Config)) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeName, cfg.NodeIPs = nodeName, []netip.Addr{node.Addr()}
	cfg.ClusterCIDRs = []string{clusterCIDR}
	cfg.MinSyncPeriod, cfg.CanaryPeriod = 50*time.Millisecond, 200*time.Millisecond
	cfg.InNetNS = node.Do
	h := &harness{t: t, reg: prometheus.NewRegistry()}
	cfg.Registerer = h.reg
	if tt, ok := t.(*testing.T); ok {
		cfg.Log = testr.NewWithOptions(tt, testr.Options{Verbosity: 1})
	}
	if edit != nil {
		edit(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	return h
}

// metric returns the value of a gauge or counter, or the sample count of a histogram,
// whose labels include the given name=value pairs; -1 when there is none.
func (h *harness) metric(name string, labels ...string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// save is `iptables-save -t table` in the host's namespace.
func save(t testing.TB, h *netlab.Host, table string) string {
	t.Helper()
	return mustExec(t, h, "iptables-save", "-t", table)
}

// chainRules returns the -A lines of chain in an iptables-save text; ok is false when
// the chain is not declared.
func chainRules(saved, chain string) (rules []string, ok bool) {
	for _, line := range strings.Split(saved, "\n") {
		if strings.HasPrefix(line, ":"+chain+" ") {
			ok = true
		}
		if strings.HasPrefix(line, "-A "+chain+" ") {
			rules = append(rules, line)
		}
	}
	return rules, ok
}

// hash is kube-proxy's chain-name hash, written out independently of the generator.
func hash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "")))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// chains names the chains of a service port (portName "ns/name:port") and of its
// endpoints ("ip:port").
type chains struct{ svc, ext, svl, fw string }

func portChains(portName, proto string) chains {
	h := hash(portName, proto)
	return chains{svc: "KUBE-SVC-" + h, ext: "KUBE-EXT-" + h, svl: "KUBE-SVL-" + h, fw: "KUBE-FW-" + h}
}

func sepChain(portName, proto, endpoint string) string {
	return "KUBE-SEP-" + hash(portName, proto, endpoint)
}

// slice is an EndpointSlice of Service svc with port "http" on target, protocol TCP
// unless given, and ready endpoints on the given nodes ("ip@node").
func slice(svc string, target int32, proto corev1.Protocol, eps ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: svc + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(proto), Port: ptr.To(target)}},
	}
	for _, e := range eps {
		ip, node, _ := strings.Cut(e, "@")
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// jumpsTo says whether rules contain one jumping to target.
func jumpsTo(rules []string, target string) bool {
	for _, r := range rules {
		if strings.HasSuffix(r, "-j "+target) {
			return true
		}
	}
	return false
}

func containsAll(rules []string, subs ...string) bool {
	all := strings.Join(rules, "\n")
	for _, s := range subs {
		if !strings.Contains(all, s) {
			return false
		}
	}
	return true
}

// webService is the Service most lab tests program: demo/web, cluster IP 10.96.0.10,
// VIP 198.51.100.10, node port 30080.
func webService() *corev1.Service {
	return testkit.LBService("demo", "web",
		testkit.ClusterIP("10.96.0.10"), testkit.Ingress("198.51.100.10"), testkit.NodePort(30080))
}
