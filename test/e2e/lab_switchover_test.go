package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/testkit"
)

// switchPrefix names the switch-over test's own lab, apart from the shared one.
const switchPrefix = "hm-"

// metallbService is a Service as MetalLB left it: its annotations (metallb.universe.tf)
// and the external IP MetalLB gave it, in status.loadBalancer.ingress.
type metallbService struct {
	name        string
	port        int32
	annotations map[string]string
	ip          netip.Addr
}

// TestLabSwitchFromMetalLB switches a cluster from MetalLB to herald as
// docs/migrating-from-metallb.md says: Services that MetalLB served (its annotations,
// its external IPs) exist before herald starts; the pools are MetalLB's, converted with
// `herald migrate`. Once herald runs, no Service's IP changed, not even for a moment,
// and every IP is answered by one node and reaches the pods from the client.
func TestLabSwitchFromMetalLB(t *testing.T) {
	f := ownLab(t, switchPrefix, "lab", lab.Config{Workers: 2, WithoutHerald: true}, false)
	ctx := t.Context()
	const ann = "metallb.universe.tf/"
	// None of these IPs is the one herald would hand out first (172.18.255.200): a
	// controller that allocated afresh would move them.
	services := []metallbService{
		{name: "mlb-plain", port: 80, ip: netip.MustParseAddr("172.18.255.207"),
			annotations: map[string]string{ann + "ip-allocated-from-pool": "first-pool"}},
		{name: "mlb-pinned", port: 80, ip: netip.MustParseAddr("172.18.255.230"),
			annotations: map[string]string{ann + "loadBalancerIPs": "172.18.255.230"}},
		{name: "mlb-shared-a", port: 80, ip: netip.MustParseAddr("172.18.255.215"),
			annotations: map[string]string{ann + "allow-shared-ip": "team", ann + "ip-allocated-from-pool": "first-pool"}},
		{name: "mlb-shared-b", port: 8080, ip: netip.MustParseAddr("172.18.255.215"),
			annotations: map[string]string{ann + "allow-shared-ip": "team", ann + "ip-allocated-from-pool": "first-pool"}},
		{name: "mlb-reserved", port: 80, ip: netip.MustParseAddr("172.18.255.102"),
			annotations: map[string]string{ann + "address-pool": "reserved", ann + "ip-allocated-from-pool": "reserved"}},
		// Its pool was not converted (say, it was deleted from MetalLB's config long
		// ago): it keeps its IP, with a Warning.
		{name: "mlb-orphan", port: 80, ip: netip.MustParseAddr("172.18.255.240"),
			annotations: map[string]string{"metallb.io/address-pool": "retired", "metallb.io/ip-allocated-from-pool": "retired"}},
	}
	for _, m := range services {
		f.createMetalLBService(t, m)
	}

	// The pools: MetalLB's, converted.
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, f.s.Herald, "migrate", "-f", filepath.Join(root, "testdata", "metallb", "pools.yaml")).Output()
	if err != nil {
		t.Fatalf("herald migrate -f testdata/metallb/pools.yaml: %v\n%s", err, stderrOf(err))
	}
	converted := filepath.Join(f.s.RunDir, "herald-pools.yaml")
	if err := os.WriteFile(converted, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := f.s.Kubectl(ctx, "apply", "-f", converted); err != nil {
		t.Fatalf("applying what herald migrate printed: %v\n%s\n%s", err, o, out)
	}

	// Every ingress change from now on, until herald has settled.
	held, from := f.lbIngresses(t)
	want := map[string]string{}
	for _, m := range services {
		want["default/"+m.name] = m.ip.String()
	}
	if !maps.Equal(held, want) {
		t.Fatalf("the Services as MetalLB left them: %v, want %v", held, want)
	}
	stopWatch := f.watchIngress(t, held, from)

	if err := f.s.StartHerald(ctx); err != nil {
		t.Fatalf("starting herald: %v", err)
	}
	for _, m := range services {
		f.expectOwner(t, m.ip, f.owner(m.ip), m.name+" once herald runs")
		f.expectCurls(t, fmt.Sprintf("http://%s:%d/", m.ip, m.port), 20, m.name+" once herald runs")
	}
	orphan, err := f.Kube.CoreV1().Services("default").Get(ctx, "mlb-orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.expectEvent(t, orphan, corev1.EventTypeWarning, "AllocationFailed",
		noteIs(`pool "retired" does not exist; the Service keeps 172.18.255.240 until it does`), "saying it keeps its IP")
	// The controller has read every Service once it hands out an IP: the new Service
	// gets the first free one, none of those MetalLB gave out.
	fresh := f.createService(t, testkit.LBService("default", "after-switch", webpods))
	got := f.waitIP(t, fresh.Name)
	if got != netip.MustParseAddr("172.18.255.200") {
		t.Errorf("a new Service got %s, want 172.18.255.200 (the first free IP of first-pool)", got)
	}
	if changes := stopWatch(); len(changes) > 0 {
		t.Errorf("Services' IPs changed when herald took over from MetalLB:\n%s", strings.Join(changes, "\n"))
	}
	after, _ := f.lbIngresses(t)
	delete(after, "default/"+fresh.Name)
	if !maps.Equal(want, after) {
		t.Errorf("Services' IPs: MetalLB's %v, herald's %v", want, after)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		t.Logf("%s kept %s", name, after[name])
	}
}

// createMetalLBService creates a Service selecting the walkthrough's pods, annotated as
// m says, and writes m's IP into its status as MetalLB's controller had.
func (f *fullLab) createMetalLBService(t *testing.T, m metallbService) {
	t.Helper()
	svc := testkit.LBService("default", m.name, webpods, func(s *corev1.Service) {
		s.Annotations = maps.Clone(m.annotations)
		s.Spec.Ports[0].Port = m.port
		s.Spec.Ports[0].TargetPort = intstr.FromInt32(80)
	})
	created := f.createService(t, svc)
	created.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: m.ip.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
	if _, err := f.Kube.CoreV1().Services("default").UpdateStatus(context.Background(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing MetalLB's IP %s into Service %s's status: %v", m.ip, m.name, err)
	}
}

// stderrOf returns what a failed command wrote to stderr, if exec kept it.
func stderrOf(err error) string {
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
