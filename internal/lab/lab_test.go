package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/lab/agent"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/netns"
	"herald.dev/herald/internal/testkit"
)

// testPrefix keeps the tests' lab apart from the one the CLI runs (hl-).
const testPrefix = "hlt-"

const waitFor = time.Minute

// TestLab builds a two-worker lab and checks what the end-to-end tests and the demo rely
// on: Nodes Ready, a Pod run by an agent with an address from its node's pod CIDR,
// published by the real EndpointSlice controller, answering HTTP like whoami across
// nodes; its namespace removed with it; the faults; and Down leaving nothing behind.
func TestLab(t *testing.T) {
	l, runDir := upForTest(t, 2)
	ctx := t.Context()
	s := l.State

	for _, w := range s.Workers() {
		n, err := l.Kube.CoreV1().Nodes().Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !nodeReady(n) || n.Spec.PodCIDR != w.PodCIDR.String() || n.Labels[corev1.LabelHostname] != w.Name {
			t.Errorf("Node %s: ready %v, pod CIDR %q, hostname label %q; want Ready, %s, %s",
				w.Name, nodeReady(n), n.Spec.PodCIDR, n.Labels[corev1.LabelHostname], w.PodCIDR, w.Name)
		}
	}

	testServiceAccounts(t, l)

	pod := createPod(t, l, "web1", "worker", 8080)
	ip := netip.MustParseAddr(pod.Status.PodIP)
	if w, _ := s.Worker("worker"); !w.PodCIDR.Contains(ip) || pod.Status.HostIP != w.Addr.String() {
		t.Errorf("pod IP %s, host IP %s; want one from %s on %s", ip, pod.Status.HostIP, w.PodCIDR, w.Addr)
	}
	expectEndpoint(t, l, ip)

	for _, from := range []string{"worker", "worker2"} { // the pod's node, and across nodes
		body, err := get(l.Net.Host(from).DialContext, fmt.Sprintf("http://%s:8080/", ip))
		if err != nil {
			t.Fatalf("HTTP from %s to the pod: %v", from, err)
		}
		if !strings.HasPrefix(body, "Hostname: web1\n") || !strings.Contains(body, "IP: "+ip.String()+"\n") {
			t.Errorf("HTTP from %s to the pod answered:\n%s", from, body)
		}
	}
	if _, err := get(l.Net.Host(ClientHost).DialContext, fmt.Sprintf("http://%s:8080/", ip)); err == nil {
		t.Errorf("the client reached the pod at %s directly; it should reach pods only through VIPs", ip)
	}
	if out, err := s.Exec(ctx, "web1", "ip", "-4", "-o", "addr", "show", "eth0"); err != nil || !strings.Contains(string(out), ip.String()+"/32") {
		t.Errorf("exec in the pod's namespace: %v: %s", err, out)
	}

	testFaults(t, s)
	for log, lines := range s.Refusals() {
		t.Errorf("%s: refused by the API server (missing RBAC?):\n%s", log, strings.Join(lines, "\n"))
	}

	ns := agent.NamespaceFor(testPrefix, "default", "web1")
	if err := l.Kube.CoreV1().Pods("default").Delete(ctx, "web1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, waitFor, 100*time.Millisecond, "pod namespace removed and the Pod gone", func() error {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
			return fmt.Errorf("namespace %s still exists", ns)
		}
		_, err := l.Kube.CoreV1().Pods("default").Get(ctx, "web1", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("Pod web1 still exists (%v)", err)
		}
		return nil
	})

	procs := s.Procs
	// Down as a later command would run it: from the run directory alone.
	for range 2 {
		if err := Down(runDir, testPrefix); err != nil {
			t.Fatalf("down: %v", err)
		}
	}
	if left := labNamespaces(testPrefix); len(left) > 0 {
		t.Errorf("namespaces left after down: %v", left)
	}
	for k, p := range procs {
		if p.Alive() {
			t.Errorf("%s (pid %d) still runs after down", k, p.Pid)
		}
	}
}

// testServiceAccounts checks that herald's components run with the kubeconfigs of the
// manifest's ServiceAccounts, which the API server takes as those accounts and allows no
// more than the manifest's RBAC, and that the namespace is the manifest's.
func testServiceAccounts(t *testing.T, l *Lab) {
	s := l.State
	for key, kubeconfig := range map[string]string{"cp-controller": s.ControllerKubeconfig, "worker-speaker": s.SpeakerKubeconfig, "worker2-speaker": s.SpeakerKubeconfig} {
		if cmd := s.Procs[key].Cmd; !slices.Contains(cmd, kubeconfig) || slices.Contains(cmd, s.Kubeconfig) {
			t.Errorf("%s runs %q, want --kubeconfig %s", key, cmd, kubeconfig)
		}
	}
	b, err := os.ReadFile(s.SpeakerKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	rc.Dial = l.CP.Config.Dial
	speaker, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := speaker.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("the speaker's kubeconfig cannot list Nodes, which its RBAC allows: %v", err)
	}
	if _, err := speaker.CoreV1().Secrets(HeraldNamespace).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the speaker's kubeconfig listing Secrets: %v, want Forbidden: is it cluster admin?", err)
	}
	ns, err := l.Kube.CoreV1().Namespaces().Get(t.Context(), HeraldNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace %s has labels %v: not the manifest's", HeraldNamespace, ns.Labels)
	}
}

// testFaults exercises the fault verbs through the state, as the CLI does.
func testFaults(t *testing.T, s *State) {
	ctx := t.Context()
	if err := s.LinkDown(ctx, "worker2"); err != nil {
		t.Fatal(err)
	}
	w2, _ := s.Worker("worker2")
	if up, err := linkUp(ctx, s, w2); err != nil || up {
		t.Errorf("after link-down worker2's link is up=%v (%v)", up, err)
	}
	if err := s.LinkUp(ctx, "worker2"); err != nil {
		t.Fatal(err)
	}
	if up, err := linkUp(ctx, s, w2); err != nil || !up {
		t.Errorf("after link-up worker2's link is up=%v (%v)", up, err)
	}

	testPartitions(t, s)

	old := s.Procs["worker-speaker"]
	if err := s.KillSpeaker("worker"); err != nil {
		t.Fatal(err)
	}
	if !old.WaitGone(10 * time.Second) {
		t.Fatalf("speaker of worker survived kill-speaker")
	}
	if err := s.StartSpeaker(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	if err := s.StartSpeaker(ctx, "worker"); err == nil {
		t.Errorf("a second start-speaker did not refuse")
	}
	if err := s.StopSpeaker("worker"); err != nil {
		t.Fatal(err)
	}
	if err := s.StartSpeaker(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	if err := s.RestartController(ctx); err != nil {
		t.Fatal(err)
	}
	// The state on disk is what a later command sees.
	disk, err := Load(s.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"worker-speaker", "cp-controller"} {
		if p := disk.Procs[k]; !p.Alive() || p.Pid == old.Pid {
			t.Errorf("recorded %s (pid %d) alive=%v after it was started again", k, p.Pid, p.Alive())
		}
	}
	var b strings.Builder
	if err := Status(ctx, &b, s.RunDir, testPrefix); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "EXITED") || !strings.Contains(b.String(), "default/web1") {
		t.Errorf("status:\n%s", b.String())
	}
}

// testPartitions checks the memberlist partition faults: their rules drop the gossip
// actually flowing, repeating a fault adds nothing, and heal removes exactly their rules.
func testPartitions(t *testing.T, s *State) {
	ctx := t.Context()
	nodes := []string{"worker", "worker2"}
	heal := func() {
		if err := s.HealMemberlist(context.Background(), nodes...); err != nil {
			t.Errorf("heal: %v", err)
		}
	}
	defer heal()
	expectRules := func(when string, want map[string][]string) {
		t.Helper()
		for _, n := range nodes {
			got, err := s.MemberlistRules(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want[n]) {
				t.Errorf("%s: rules of %s:\n%s\nwant:\n%s", when, n, strings.Join(got, "\n"), strings.Join(want[n], "\n"))
			}
		}
	}
	// The rules as iptables -S lists them: by chain, each inserted first, so udp first.
	ruleSet := func(peer string) []string {
		var out []string
		for _, chain := range []string{"INPUT", "OUTPUT"} {
			for _, proto := range []string{"udp", "tcp"} {
				addr := ""
				if peer != "" {
					dir := map[string]string{"INPUT": "-s", "OUTPUT": "-d"}[chain]
					addr = dir + " " + peer + "/32 "
				}
				out = append(out, fmt.Sprintf(`-A %s %s-p %s -m multiport --ports 7946 -m comment --comment "%s" -j DROP`, chain, addr, proto, partitionComment))
			}
		}
		return out
	}

	// A rule of someone else's, which heal must leave alone.
	foreign := []string{"OUTPUT", "-p", "udp", "--dport", "9", "-m", "comment", "--comment", "not the lab's", "-j", "DROP"}
	if out, err := s.Exec(ctx, "worker", append([]string{"iptables", "-w", "-I"}, foreign...)...); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	defer func() {
		if out, err := s.Exec(context.Background(), "worker", append([]string{"iptables", "-w", "-D"}, foreign...)...); err != nil {
			t.Errorf("removing the foreign rule: %v: %s", err, out)
		}
	}()

	for range 2 {
		if err := s.PartitionMemberlist(ctx, "worker"); err != nil {
			t.Fatal(err)
		}
	}
	expectRules("partition worker, twice", map[string][]string{"worker": ruleSet("")})
	// The speakers gossip every 200 ms: the rules must be dropping it.
	testkit.Eventually(t, waitFor, 100*time.Millisecond, "worker's partition rules drop packets", func() error {
		out, err := s.Exec(ctx, "worker", "iptables", "-w", "-L", "INPUT", "-v", "-n", "-x")
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(out)) {
			if f := strings.Fields(line); len(f) > 0 && strings.Contains(line, partitionComment) && f[0] != "0" {
				return nil
			}
		}
		return fmt.Errorf("no packet dropped yet:\n%s", out)
	})
	heal()
	expectRules("heal", nil)

	w, w2 := mustWorker(t, s, "worker"), mustWorker(t, s, "worker2")
	for range 2 {
		if err := s.SplitMemberlist(ctx, []string{"worker"}, []string{"worker2"}); err != nil {
			t.Fatal(err)
		}
	}
	expectRules("split worker | worker2, twice", map[string][]string{
		"worker":  ruleSet(w2.Addr.String()),
		"worker2": ruleSet(w.Addr.String()),
	})
	heal()
	expectRules("heal after the split", nil)

	// Refused: a connection to or from worker's memberlist fails at once, as to a
	// host where nothing listens yet, not after a timeout as when dropped.
	if err := s.RefuseMemberlist(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to HostInfo }{{w2, w}, {w, w2}} {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		conn, err := netns.Dialer(c.from.Namespace)(dctx, "tcp", net.JoinHostPort(c.to.Addr.String(), "7946"))
		cancel()
		if err == nil {
			conn.Close()
			t.Errorf("%s connected to %s's memberlist while worker refuses memberlist", c.from.Name, c.to.Name)
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s connecting to %s's memberlist while worker refuses memberlist: %v, want connection refused", c.from.Name, c.to.Name, err)
		}
	}
	heal()
	expectRules("heal after refusing", nil)
	if out, err := s.Exec(ctx, "worker", append([]string{"iptables", "-w", "-C"}, foreign...)...); err != nil {
		t.Errorf("heal removed a rule that was not the lab's: %v: %s", err, out)
	}
	if err := s.SplitMemberlist(ctx, []string{"worker"}, []string{"worker", "worker2"}); err == nil {
		t.Errorf("a split with worker on both sides did not refuse")
	}
	if err := s.PartitionMemberlist(ctx, ClientHost); err == nil {
		t.Errorf("partitioning the client, which runs no speaker, did not refuse")
	}
}

func mustWorker(t *testing.T, s *State, name string) HostInfo {
	t.Helper()
	h, err := s.Worker(name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestUpInterrupted stops Up half-way, while the control plane starts, and requires it to
// have removed everything it made.
func TestUpInterrupted(t *testing.T) {
	assets := requireLab(t)
	runDir := filepath.Join(os.TempDir(), "herald-lab-test-interrupted")
	if err := Down(runDir, testPrefix); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Cancel while the agents start: the control plane and some agents run by then.
	log := &onLine{match: "agents (kubelet stand-ins)", do: func() { time.AfterFunc(100*time.Millisecond, cancel) }}
	_, err := Up(ctx, Config{Prefix: testPrefix, RunDir: runDir, Workers: 1, Assets: assets, Log: log})
	if err == nil {
		_ = Down(runDir, testPrefix)
		t.Fatal("Up succeeded despite being cancelled")
	}
	t.Logf("Up cancelled: %v", err)
	if left := labNamespaces(testPrefix); len(left) > 0 {
		t.Errorf("namespaces left by an interrupted Up: %v", left)
	}
	if _, err := Load(runDir); !errors.Is(err, ErrNoLab) {
		t.Errorf("state left by an interrupted Up: %v", err)
	}
}

// requireLab fails (never skips) where labs cannot be built, saying why.
func requireLab(t *testing.T) string {
	t.Helper()
	if err := netlab.Check(); err != nil {
		t.Fatalf("the lab tests build network namespaces: %v", err)
	}
	assets, err := netlab.Assets()
	if err != nil {
		t.Fatal(err)
	}
	return assets
}

func upForTest(t *testing.T, workers int) (*Lab, string) {
	t.Helper()
	assets := requireLab(t)
	runDir := filepath.Join(os.TempDir(), "herald-lab-test")
	if err := Down(runDir, testPrefix); err != nil { // an earlier run's leftovers
		t.Fatal(err)
	}
	l, err := Up(t.Context(), Config{Prefix: testPrefix, RunDir: runDir, Workers: workers, Assets: assets, Log: tlog{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of the failed run are in %s", runDir)
		}
		if err := l.Down(); err != nil {
			t.Errorf("down: %v", err)
		}
	})
	return l, runDir
}

// createPod creates a Pod bound to node with one container port and waits until its
// agent reports it Running and Ready.
func createPod(t *testing.T, l *Lab, name, node string, port int32) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "whoami", Image: "traefik/whoami",
				Ports: []corev1.ContainerPort{{ContainerPort: port}}}}},
	}
	if _, err := l.Kube.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, waitFor, 100*time.Millisecond, "pod "+name+" Running and Ready", func() error {
		var err error
		pod, err = l.Kube.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || !conditionTrue(pod, corev1.PodReady) {
			return fmt.Errorf("phase %s, IP %q, conditions %v", pod.Status.Phase, pod.Status.PodIP, pod.Status.Conditions)
		}
		return nil
	})
	return pod
}

// expectEndpoint creates a Service selecting the pod and waits until the EndpointSlice
// controller lists ip as a ready endpoint.
func expectEndpoint(t *testing.T, l *Lab, ip netip.Addr) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web1"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := l.Kube.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, waitFor, 100*time.Millisecond, "EndpointSlice of Service web lists the pod ready", func() error {
		slices, err := l.Kube.DiscoveryV1().EndpointSlices("default").List(t.Context(),
			metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return err
		}
		for _, es := range slices.Items {
			for _, ep := range es.Endpoints {
				if len(ep.Addresses) > 0 && ep.Addresses[0] == ip.String() && ptr.Deref(ep.Conditions.Ready, false) &&
					ptr.Deref(ep.NodeName, "") == "worker" {
					return nil
				}
			}
		}
		return fmt.Errorf("slices: %+v", slices.Items)
	})
}

func conditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func get(dial func(ctx context.Context, network, addr string) (net.Conn, error), url string) (string, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: dial}, Timeout: 2 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// tlog sends Up's progress to the test log.
type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// onLine runs do once, when a written line contains match.
type onLine struct {
	match string
	do    func()
	once  sync.Once
}

func (o *onLine) Write(p []byte) (int, error) {
	if strings.Contains(string(p), o.match) {
		o.once.Do(o.do)
	}
	return len(p), nil
}
