package app

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testenv"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func lb(ns, name string, mutate ...func(*corev1.Service)) corev1.Service {
	svc := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
	for _, m := range mutate {
		m(&svc)
	}
	return svc
}

func ips(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

func fromPool(pool string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Annotations = map[string]string{heraldv1.AnnotationAllocatedFromPool: pool}
	}
}

func class(c string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &c }
}

func vipStatus(ns, ip string, st heraldv1.VIPStatusStatus) heraldv1.VIPStatus {
	st.IP = ip
	return heraldv1.VIPStatus{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: heraldv1.VIPStatusName(mustAddr(ip))},
		Status:     st,
	}
}

func at(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(now.Add(-d))) }

func TestStatusRows(t *testing.T) {
	owned := heraldv1.VIPStatusStatus{Node: "worker2", Interface: "eth0", MAC: "02:42:ac:12:00:04", Since: at(312 * time.Second),
		LeaderChanges: 3, Pool: "default", ObservedAt: at(time.Second)}
	svcs := []corev1.Service{
		lb("default", "web", ips("172.18.255.201"), fromPool("default")),
		lb("default", "api", ips("172.18.255.200", "fd00::1"), fromPool("default")),
		lb("default", "pending"), // no IP yet: no row
		lb("default", "hostname", func(s *corev1.Service) { // not an IP anybody announces
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.com"}}
		}),
		lb("default", "other-class", ips("10.0.0.1"), class("example.com/other")),
		lb("default", "our-class", ips("172.18.255.210"), class("herald.dev/lb")),
		lb("default", "allocated", ips("172.18.255.211"), class("example.com/x"), fromPool("p2")), // herald's annotation: ours
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cluster-ip"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}},
		lb("apps", "shared", ips("172.18.255.201")),
	}
	vips := []heraldv1.VIPStatus{
		vipStatus("default", "172.18.255.201", owned),
		vipStatus("default", "fd00::1", heraldv1.VIPStatusStatus{Since: at(time.Hour), LeaderChanges: 1, Reason: "NoEndpoints",
			Message: "no endpoint", Pool: "v6pool"}),
	}
	got := StatusRows(svcs, vips, "herald.dev/lb")
	want := []VIPRow{
		// The object of another namespace does not count: apps/shared's is missing.
		{Namespace: "apps", Service: "shared", VIP: "172.18.255.201"},
		{Namespace: "default", Service: "allocated", VIP: "172.18.255.211", Pool: "p2"},
		{Namespace: "default", Service: "api", VIP: "172.18.255.200", Pool: "default"},
		{Namespace: "default", Service: "api", VIP: "fd00::1", Since: "2026-05-01T11:00:00Z", LeaderChanges: 1, Pool: "v6pool",
			Reason: "NoEndpoints", Message: "no endpoint", Published: true},
		{Namespace: "default", Service: "our-class", VIP: "172.18.255.210"},
		{Namespace: "default", Service: "web", VIP: "172.18.255.201", OwnerNode: "worker2", Interface: "eth0", MAC: "02:42:ac:12:00:04",
			Since: "2026-05-01T11:54:48Z", LeaderChanges: 3, Pool: "default", Published: true, ObservedAt: "2026-05-01T11:59:59Z"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows:\n%s\nwant:\n%s", dump(got), dump(want))
	}
}

func dump(rows []VIPRow) string {
	b, _ := json.MarshalIndent(rows, "", " ")
	return string(b)
}

func TestPrintStatusTable(t *testing.T) {
	rows := []VIPRow{
		{Namespace: "default", Service: "svc1", VIP: "172.18.255.200", OwnerNode: "worker2", Interface: "eth0", MAC: "02:42:ac:12:00:04",
			Since: "2026-05-01T11:54:48Z", LeaderChanges: 3, Pool: "default", Published: true},
		{Namespace: "default", Service: "svc2", VIP: "fd00::1", Since: "2026-05-01T10:00:00Z", LeaderChanges: 1, Pool: "default",
			Reason: "NoEndpoints", Message: "no endpoint", Published: true},
		{Namespace: "kube-system", Service: "dns", VIP: "172.18.255.201"},
	}
	for _, c := range []struct {
		name             string
		wide, namespaces bool
		want             string
	}{
		{"one namespace", false, false, `
SERVICE   VIP              OWNER NODE   MAC                 SINCE    LEADER CHANGES   POOL
svc1      172.18.255.200   worker2      02:42:ac:12:00:04   5m12s    3                default
svc2      fd00::1          <none>       <none>              120m     1                default
dns       172.18.255.201   <none>       <none>              <none>   0                <none>
`},
		{"every namespace", false, true, `
NAMESPACE     SERVICE   VIP              OWNER NODE   MAC                 SINCE    LEADER CHANGES   POOL
default       svc1      172.18.255.200   worker2      02:42:ac:12:00:04   5m12s    3                default
default       svc2      fd00::1          <none>       <none>              120m     1                default
kube-system   dns       172.18.255.201   <none>       <none>              <none>   0                <none>
`},
		{"wide", true, false, `
SERVICE   VIP              OWNER NODE   MAC                 SINCE    LEADER CHANGES   POOL      INTERFACE   REASON            MESSAGE
svc1      172.18.255.200   worker2      02:42:ac:12:00:04   5m12s    3                default   eth0        <none>            <none>
svc2      fd00::1          <none>       <none>              120m     1                default   <none>      NoEndpoints       no endpoint
dns       172.18.255.201   <none>       <none>              <none>   0                <none>    <none>      <not published>   <none>
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := PrintStatusTable(&b, rows, now, c.wide, c.namespaces); err != nil {
				t.Fatal(err)
			}
			if got := "\n" + b.String(); got != c.want {
				t.Errorf("got:%s\nwant:%s", got, c.want)
			}
		})
	}
}

func TestStatusBadFlags(t *testing.T) {
	if _, err := run("status", "-o", "xml"); err == nil || !strings.Contains(err.Error(), "want table, wide, json or yaml") {
		t.Errorf("-o xml: err = %v", err)
	}
	if _, err := run("status", "--kubeconfig", "/nonexistent/kubeconfig"); err == nil || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("missing kubeconfig: err = %v, want one naming the file", err)
	}
	if _, err := run("status", "extra"); err == nil {
		t.Error("status takes no arguments")
	}
}

func TestStatusUnreachableAPIServer(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
contexts:
- name: c
  context: {cluster: c, user: u}
- name: other
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user: {token: t}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := run("status", "--kubeconfig", kc)
	if err == nil || !strings.Contains(err.Error(), "cannot reach the API server at https://127.0.0.1:1") {
		t.Errorf("err = %v, want one saying the API server cannot be reached", err)
	}
	_, err = run("status", "--kubeconfig", kc, "--context", "nope")
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("--context nope: err = %v, want one naming the context", err)
	}
}

// herald status against a real API server: the table, -n, -o json and yaml, and a
// user allowed nothing.
func TestStatusAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	for _, ns := range []string{"apps"} {
		env.CreateNamespace(t, ns)
	}
	for _, svc := range []corev1.Service{
		lb("default", "svc1", ips("172.18.255.200"), fromPool("default")),
		lb("apps", "svc2", ips("172.18.255.201"), fromPool("default")),
	} {
		status := svc.Status
		if err := env.Client.Create(ctx, &svc); err != nil {
			t.Fatal(err)
		}
		svc.Status = status
		if err := env.Client.Status().Update(ctx, &svc); err != nil {
			t.Fatal(err)
		}
	}
	since := metav1.NewTime(time.Now().Add(-5 * time.Minute))
	v := vipStatus("default", "172.18.255.200", heraldv1.VIPStatusStatus{Node: "worker2", Interface: "eth0", MAC: "02:42:ac:12:00:04",
		Since: &since, LeaderChanges: 2, Pool: "default", Services: []string{"svc1"}})
	if err := env.Client.Create(ctx, &v); err != nil {
		t.Fatal(err)
	}
	admin := env.Kubeconfig(t, "admin", "system:masters")

	out, err := run("status", "--kubeconfig", admin)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAMESPACE   SERVICE   VIP   ") ||
		!strings.Contains(lines[0], "OWNER NODE") || !strings.Contains(lines[0], "LEADER CHANGES") {
		t.Fatalf("table:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "apps" || f[3] != "<none>" {
		t.Errorf("apps/svc2 (no VIPStatus): %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "default" || f[3] != "worker2" || f[4] != "02:42:ac:12:00:04" || !strings.HasPrefix(f[5], "5m") || f[6] != "2" {
		t.Errorf("default/svc1: %q", lines[2])
	}

	out, err = run("status", "--kubeconfig", admin, "-n", "default", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep StatusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(rep.Items) != 1 || rep.Items[0].OwnerNode != "worker2" || rep.Items[0].LeaderChanges != 2 ||
		rep.Items[0].Since != since.UTC().Format(time.RFC3339) {
		t.Errorf("-n default -o json: %+v", rep.Items)
	}
	out, err = run("status", "--kubeconfig", admin, "-n", "apps", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep = StatusReport{}
	if err := yaml.UnmarshalStrict([]byte(out), &rep); err != nil || len(rep.Items) != 1 || rep.Items[0].Service != "svc2" || rep.Items[0].Published {
		t.Errorf("-n apps -o yaml (%v):\n%s", err, out)
	}
	if out, err := run("status", "--kubeconfig", admin, "-n", "empty"); err != nil || !strings.Contains(out, "No LoadBalancer IPs found in namespace empty") {
		t.Errorf("empty namespace: %q, %v", out, err)
	}

	// A speaker withheld worker's endpoints (an events.k8s.io Event on the Node, as the
	// speakers write it): the table says so below the rows, and -o json lists it.
	withheld := eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "worker.withheld"},
		Regarding:  corev1.ObjectReference{Kind: "Node", Name: "worker", APIVersion: "v1"},
		EventTime:  metav1.NewMicroTime(time.Now().Add(-2 * time.Minute)), Type: corev1.EventTypeWarning,
		Reason: heraldv1.ReasonEndpointsWithheld, Action: "Withhold", Note: "its speaker vanished",
		ReportingController: "herald.dev/speaker", ReportingInstance: "worker2",
	}
	if err := env.Client.Create(ctx, &withheld); err != nil {
		t.Fatal(err)
	}
	out, err = run("status", "--kubeconfig", admin, "-o", "wide")
	if err != nil || !strings.Contains(out, "node worker is dead to the speakers (for 2m") || !strings.Contains(out, "reported by worker2") {
		t.Errorf("-o wide with worker withheld (%v):\n%s", err, out)
	}
	out, err = run("status", "--kubeconfig", admin, "-o", "json")
	rep = StatusReport{}
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || len(rep.WithheldNodes) != 1 || rep.WithheldNodes[0].Node != "worker" {
		t.Errorf("-o json with worker withheld (%v):\n%s", err, out)
	}

	nobody := env.Kubeconfig(t, "nobody")
	_, err = run("status", "--kubeconfig", nobody)
	if err == nil || !strings.Contains(err.Error(), "forbids listing Services") {
		t.Errorf("user allowed nothing: err = %v, want one saying listing Services is forbidden", err)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// A VIP in a handover shows it next to its owner, and its note under -o wide.
func TestPrintStatusTableHandover(t *testing.T) {
	rows := []VIPRow{{Namespace: "default", Service: "svc1", VIP: "172.18.255.200", OwnerNode: "worker2", MAC: "02:42:ac:12:00:04",
		Since: "2026-05-01T11:59:50Z", LeaderChanges: 4, Pool: "default", Published: true,
		Reason: heraldv1.VIPReasonHandover, Message: "taken from worker3 (cordoned)"}}
	var b strings.Builder
	if err := PrintStatusTable(&b, rows, now, true, false); err != nil {
		t.Fatal(err)
	}
	want := `
SERVICE   VIP              OWNER NODE           MAC                 SINCE   LEADER CHANGES   POOL      INTERFACE   REASON     MESSAGE
svc1      172.18.255.200   worker2 (handover)   02:42:ac:12:00:04   10s     4                default   <none>      Handover   taken from worker3 (cordoned)
`
	if got := "\n" + b.String(); got != want {
		t.Errorf("got:%s\nwant:%s", got, want)
	}
}
