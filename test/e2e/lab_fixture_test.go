package e2e

// The full lab (internal/lab): the walkthrough's cluster with pods and the proxier, as
// `make demo` builds it. The TestLab* tests and BenchmarkLab share one such lab, built
// on first use and removed by TestMain; each test creates Services, pools and pods of
// its own and undoes whatever cluster-wide change it makes (labels, faults) before it
// returns, so the tests do not depend on one another's order.
//
// The shared lab: prefix he-, three workers (worker, worker2, worker3), the pool and
// L2Advertisement of config/samples, webpod1 on worker and webpod2 on worker2
// (hack/demo/webpods.yaml, also labelled herald-e2e/pod=<name>) and svc1..svc3
// (hack/demo/services.yaml), and the client at 172.18.0.100.

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/records"
)

const (
	// fullPrefix keeps the shared lab apart from the CLI's (hl-), internal/lab's tests'
	// (hlt-), this package's lighter clusters (hs-, hb-) and the even-split tests' own
	// labs (splitPrefix, hp-).
	fullPrefix = "he-"
	// labWait bounds every wait for the lab to converge (labtest.Wait).
	labWait = labtest.Wait
	// ownerWindow is how long exactly one MAC must answer ARP, every 20 ms, to count as
	// the owner (or none, to count as silence).
	ownerWindow = 1500 * time.Millisecond
	// podLabel names each pod of the tests, so a Service can select one pod.
	podLabel = "herald-e2e/pod"
)

// walkthrough are the Services of hack/demo/services.yaml.
var walkthrough = []string{"svc1", "svc2", "svc3"}

var fullRunDir = filepath.Join(os.TempDir(), "herald-e2e", fullPrefix+"lab")

// fullLab is a walkthrough lab as the tests use it: the shared one, or one of another
// size that a test builds for itself (upFullLab).
type fullLab struct {
	*lab.Lab
	s        *lab.State
	c        client.Client // with herald's types
	clientNS string
	nodes    []string          // the workers, in order
	macs     map[string]string // eth0 MAC by worker
	vips     map[string]netip.Addr
}

var shared struct {
	once sync.Once
	used bool
	lab  *fullLab
	err  error
	// reported counts, by log, the refusals already reported (newRefusals).
	reported map[string]int
}

// TestMain removes the shared lab, if a test built it, once every test has run. A run
// killed before that (a test binary timeout) leaves it behind; the next run removes it
// before building its own. Before that it fails the run if herald's components were
// refused anything since the last test's check (newRefusals).
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.lab != nil {
		// Refusals after the last test's own check, up to now.
		if lines := shared.lab.newRefusals(); len(lines) > 0 {
			fmt.Fprintf(os.Stderr, "herald's components in the shared lab were refused by the API server (missing RBAC?):\n%s\n", strings.Join(lines, "\n"))
			code = max(code, 1)
		}
	}
	if shared.used {
		if err := lab.Down(fullRunDir, fullPrefix); err != nil {
			fmt.Fprintf(os.Stderr, "removing the shared lab (%s): %v\n", fullPrefix, err)
			code = max(code, 1)
		}
		if code != 0 && shared.err == nil {
			fmt.Fprintf(os.Stderr, "logs of the shared lab are in %s\n", fullRunDir)
		}
	}
	os.Exit(code)
}

// fullLabFor returns the shared lab, building it on first use. It fails (never skips)
// where the lab cannot be built, saying why, and repairs what an earlier failed test may
// have left broken (a speaker or the controller not running, a cable pulled).
func fullLabFor(tb testing.TB) *fullLab {
	tb.Helper()
	shared.once.Do(func() {
		shared.used = true
		shared.lab, shared.err = upFullLab(fullPrefix, fullRunDir, 3)
	})
	if shared.err != nil {
		tb.Fatalf("the shared lab (prefix %s, logs in %s) is not up: %v", fullPrefix, fullRunDir, shared.err)
	}
	f := shared.lab
	f.heal(tb)
	tb.Cleanup(func() {
		// herald's components run under the manifest's ServiceAccounts (lab.Up): a
		// refusal means the manifest's RBAC lacks something this test needed.
		if lines := f.newRefusals(); len(lines) > 0 {
			tb.Errorf("herald's components were refused by the API server during this test (missing RBAC in %s?):\n%s",
				lab.Manifest, strings.Join(lines, "\n"))
		}
		if tb.Failed() {
			tb.Logf("logs of the lab are in %s", fullRunDir)
		}
	})
	return f
}

// newRefusals returns the lines of the controller's and the speakers' logs where the
// API server refused them something (lab.Refusals), prefixed with the log's name, that
// no earlier call returned.
func (f *fullLab) newRefusals() []string {
	if shared.reported == nil {
		shared.reported = map[string]int{}
	}
	refused := f.s.Refusals()
	var out []string
	for _, log := range slices.Sorted(maps.Keys(refused)) {
		lines := refused[log]
		for _, l := range lines[min(shared.reported[log], len(lines)):] {
			out = append(out, filepath.Base(log)+": "+l)
		}
		shared.reported[log] = len(lines)
	}
	return out
}

// upFullLab builds the walkthrough's cluster with the given workers: `make demo` up to
// the curls. The caller removes it (lab.Down).
func upFullLab(prefix, runDir string, workers int) (*fullLab, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := upLab(ctx, lab.Config{Prefix: prefix, RunDir: runDir, Workers: workers})
	if err != nil {
		return nil, err
	}
	if err := f.setUpWalkthrough(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// upLab builds a lab as cfg says, with the walkthrough's pods running (webpod1 on
// worker, webpod2 on worker2, when there are two workers), but no pool and no
// Service. The caller removes it (lab.Down).
func upLab(ctx context.Context, cfg lab.Config) (*fullLab, error) {
	l, err := labtest.UpLab(ctx, cfg)
	if err != nil {
		return nil, err
	}
	f := &fullLab{Lab: l, s: l.State, macs: map[string]string{}, vips: map[string]netip.Addr{}}
	if f.c, err = client.New(f.CP.Config, client.Options{Scheme: scheme.New()}); err != nil {
		return nil, err
	}
	cl, err := f.s.Host(lab.ClientHost)
	if err != nil {
		return nil, err
	}
	f.clientNS = cl.Namespace
	for _, w := range f.s.Workers() {
		f.nodes = append(f.nodes, w.Name)
		f.macs[w.Name] = w.MAC
	}
	if err := f.apply(ctx, "hack/demo/webpods.yaml"); err != nil {
		return nil, err
	}
	for _, pod := range []string{"webpod1", "webpod2"} {
		if err := f.waitPodReady(ctx, "default", pod); err != nil {
			return nil, err
		}
		if _, err := f.s.Kubectl(ctx, "label", "pod", pod, podLabel+"="+pod); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// apply runs kubectl apply with the files, paths in the repository.
func (f *fullLab) apply(ctx context.Context, files ...string) error {
	root, err := netlab.RepoRoot(ctx)
	if err != nil {
		return err
	}
	args := []string{"apply"}
	for _, file := range files {
		args = append(args, "-f", filepath.Join(root, file))
	}
	_, err = f.s.Kubectl(ctx, args...)
	return err
}

// setUpWalkthrough applies the walkthrough's pool, L2Advertisement and Services and
// waits for their IPs.
func (f *fullLab) setUpWalkthrough(ctx context.Context) error {
	if err := f.apply(ctx, "config/samples/ipaddresspool.yaml", "config/samples/l2advertisement.yaml", "hack/demo/services.yaml"); err != nil {
		return err
	}
	for _, name := range walkthrough {
		err := testkit.Poll(labWait, 100*time.Millisecond, func() (err error) {
			f.vips[name], err = labtest.Ingress(ctx, f.c, keyIn("default", name))
			return err
		})
		if err != nil {
			return fmt.Errorf("Service %s got no external IP: %v", name, err)
		}
	}
	return nil
}

// heal starts again a speaker or controller that an earlier test left stopped, plugs
// every cable back in and lifts every memberlist partition, so that one failure does not
// cascade into every test.
func (f *fullLab) heal(tb testing.TB) {
	tb.Helper()
	ctx := tb.Context()
	for _, n := range f.nodes {
		if err := f.s.LinkUp(ctx, n); err != nil {
			tb.Fatalf("plugging %s's cable back in: %v", n, err)
		}
		if err := f.s.HealMemberlist(ctx, n); err != nil {
			tb.Fatalf("lifting memberlist partitions on %s: %v", n, err)
		}
		if p := f.s.Procs[n+"-speaker"]; p.Alive() {
			if err := f.s.ThawSpeaker(n); err != nil { // an earlier test may have frozen it
				tb.Fatalf("thawing the speaker of %s: %v", n, err)
			}
		} else {
			tb.Logf("the speaker of %s is not running (left by an earlier test?): starting it", n)
			if err := f.s.StartSpeaker(ctx, n); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if p := f.s.Procs[lab.CPHost+"-controller"]; !p.Alive() {
		tb.Logf("herald's controller is not running (left by an earlier test?): starting it")
		if err := f.s.RestartController(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	for _, n := range f.nodes {
		f.cordon(tb, n, false) // an earlier test may have left it cordoned
	}
	f.waitAllInQuorum(tb)
	// An earlier test's faults left VIPs with the nodes that stood in (no fail-back):
	// every test starts from the hash's placement.
	f.rebalanceAll(tb)
}

// waitAllInQuorum waits until every worker's record says Quorum and lists every worker:
// every speaker hears every other. A fault inflicted before that (a node that just came
// back may still hold its peers dead) tests the lab's last fault, not this one.
func (f *fullLab) waitAllInQuorum(t testing.TB) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, 250*time.Millisecond, "the speakers all in Quorum", func() error {
		var leases coordinationv1.LeaseList
		if err := f.c.List(t.Context(), &leases, client.InNamespace(heraldNS), client.HasLabels{records.Label}); err != nil {
			return err
		}
		settled := 0
		for _, l := range leases.Items {
			members := strings.Split(l.Annotations[records.MembersAnnotation], ",")
			if l.Annotations[records.ModeAnnotation] == "Quorum" && len(members) == len(f.nodes) && slices.ContainsFunc(f.nodes, func(n string) bool {
				return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == n
			}) {
				settled++
			}
		}
		if settled != len(f.nodes) {
			return fmt.Errorf("%d of %d records say Quorum with every worker", settled, len(f.nodes))
		}
		return nil
	})
}

// rebalance asks for the IPs of the named Services of namespace default to go to the
// nodes the hash places them on, as `herald rebalance` does: with no fail-back, a VIP
// stays with the node that took it over until someone asks.
func (f *fullLab) rebalance(tb testing.TB, names ...string) {
	tb.Helper()
	for _, n := range names {
		rebalanceService(tb, f.c, keyIn("default", n))
	}
}

// rebalanceAll rebalances every LoadBalancer Service with an IP.
func (f *fullLab) rebalanceAll(tb testing.TB) {
	tb.Helper()
	var list corev1.ServiceList
	if err := f.c.List(tb.Context(), &list); err != nil {
		tb.Fatalf("listing Services to rebalance: %v", err)
	}
	for _, svc := range list.Items {
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) > 0 {
			rebalanceService(tb, f.c, keyIn(svc.Namespace, svc.Name))
		}
	}
}

// rebalanceService sets the Service's herald.dev/rebalance annotation to a new value.
func rebalanceService(tb testing.TB, c client.Client, key types.NamespacedName) {
	tb.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, heraldv1.AnnotationRebalance, time.Now().UTC().Format(time.RFC3339Nano))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := c.Patch(tb.Context(), svc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		tb.Fatalf("rebalancing %s: %v", key, err)
	}
}

func (f *fullLab) waitPodReady(ctx context.Context, ns, name string) error {
	err := testkit.Poll(labWait, 100*time.Millisecond, func() error {
		pod, err := f.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && !(pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && podReady(pod)) {
			err = fmt.Errorf("phase %s, IP %q, conditions %v", pod.Status.Phase, pod.Status.PodIP, pod.Status.Conditions)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("pod %s/%s not Running and Ready: %v", ns, name, err)
	}
	return nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ingress returns the Service's first external IP, the zero Addr when it has none.
func (f *fullLab) ingress(ctx context.Context, name string) (netip.Addr, error) {
	ip, err := labtest.Ingress(ctx, f.c, keyIn("default", name))
	if errors.Is(err, labtest.ErrNoIngress) {
		return netip.Addr{}, nil
	}
	return ip, err
}

// --- Services -------------------------------------------------------------------

// webpods makes a Service send to the walkthrough's pods (app=webpod) on their port 80,
// as hack/demo/services.yaml does.
func webpods(s *corev1.Service) {
	testkit.Selecting("app", "webpod")(s)
	testkit.TargetPort(80)(s)
}

// createService creates svc and deletes it when the test ends.
func (f *fullLab) createService(tb testing.TB, svc *corev1.Service) *corev1.Service {
	tb.Helper()
	created, err := f.Kube.CoreV1().Services(svc.Namespace).Create(tb.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("creating Service %s: %v", svc.Name, err)
	}
	tb.Cleanup(func() { f.deleteService(tb, created.Name) })
	return created
}

func (f *fullLab) deleteService(tb testing.TB, name string) {
	err := f.Kube.CoreV1().Services("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		tb.Errorf("deleting Service %s: %v", name, err)
	}
}

// waitIP waits until the Service has an external IP and returns it.
func (f *fullLab) waitIP(tb testing.TB, name string) netip.Addr {
	tb.Helper()
	return labtest.WaitIngress(tb, f.c, keyIn("default", name))
}

// usedIPs are the external IPs of every Service.
func (f *fullLab) usedIPs(tb testing.TB) map[netip.Addr]string {
	tb.Helper()
	list, err := f.Kube.CoreV1().Services("").List(tb.Context(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	used := map[netip.Addr]string{}
	for _, s := range list.Items {
		for _, in := range s.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(in.IP); err == nil {
				used[ip] = s.Namespace + "/" + s.Name
			}
		}
	}
	return used
}

// serviceFirstFor creates a LoadBalancer Service called name holding a free IP whose
// election puts node first, and returns it with its IP.
func (f *fullLab) serviceFirstFor(tb testing.TB, name, node string) (*corev1.Service, netip.Addr) {
	tb.Helper()
	want := f.freeIPFirstFor(tb, node)
	svc := f.createService(tb, testkit.LBService("default", name,
		webpods, testkit.Annotated(heraldv1.AnnotationLoadBalancerIPs, want.String())))
	if vip := f.waitIP(tb, svc.Name); vip != want {
		tb.Fatalf("Service %s asked for %s and got %s", name, want, vip)
	}
	return svc, want
}

// freeIPFirstFor picks a free address of the walkthrough's pool (from its top end,
// away from the addresses handed out in order) that the election gives first to node
// among every worker, so a test can choose which node owns its VIP.
func (f *fullLab) freeIPFirstFor(tb testing.TB, node string) netip.Addr {
	tb.Helper()
	used := f.usedIPs(tb)
	for last := 250; last >= 200; last-- {
		ip := netip.AddrFrom4([4]byte{172, 18, 255, byte(last)})
		if _, taken := used[ip]; !taken && election.Order(ip, f.nodes)[0] == node {
			return ip
		}
	}
	tb.Fatalf("no free IP of 172.18.255.200-250 is elected to %s first", node)
	return netip.Addr{}
}

// owner is the node the election picks for vip among candidates (every worker when
// none are given): the first of the rendezvous order, since the tests' Services fit
// their candidates alike.
func (f *fullLab) owner(vip netip.Addr, candidates ...string) string {
	if len(candidates) == 0 {
		candidates = f.nodes
	}
	return election.Order(vip, candidates)[0]
}

func without(nodes []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return slices.Contains(drop, n) })
}

// --- ARP, seen from the client --------------------------------------------------

// expectOwner waits until exactly one MAC, want's, answers ARP (NDP for an IPv6 VIP)
// for vip over a whole ownerWindow, asked from the client every 20 ms.
func (f *fullLab) expectOwner(tb testing.TB, vip netip.Addr, want, when string) {
	tb.Helper()
	wantMAC := f.macs[want]
	if wantMAC == "" {
		tb.Fatalf("%s: %q is no worker", when, want)
	}
	f.watchUntil(tb, vip, when, fmt.Sprintf("exactly one: %s's (%s)", want, wantMAC), func(macs []string) bool {
		return len(macs) == 1 && macs[0] == wantMAC
	})
}

// expectSilence waits until no MAC answers ARP for vip over a whole ownerWindow.
func (f *fullLab) expectSilence(tb testing.TB, vip netip.Addr, when string) {
	tb.Helper()
	f.watchUntil(tb, vip, when, "none", func(macs []string) bool { return len(macs) == 0 })
}

// watchUntil asks from the client who has vip, by ARP or for an IPv6 VIP by NDP, until
// the MACs answering over a whole ownerWindow are ok.
func (f *fullLab) watchUntil(tb testing.TB, vip netip.Addr, when, want string, ok func(macs []string) bool) {
	tb.Helper()
	w, err := lab.WatchNeighbour(f.clientNS, vip, 20*time.Millisecond)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	labtest.WaitARP(tb, w, ownerWindow, labWait, when, labtest.ARPWant{What: want, OK: ok}, f.hostOfMAC)
}

// hostOfMAC names the lab host whose eth0 has mac.
func (f *fullLab) hostOfMAC(mac string) string {
	if h, ok := f.s.HostByMAC(mac); ok {
		return h.Name
	}
	return "not a lab host"
}

// describeMACs names the hosts of MACs: "[02:42:.. (worker2)]".
func (f *fullLab) describeMACs(macs []string) string { return hostsOfMACs(f.s, macs) }

func hostsOfMACs(s *lab.State, macs []string) string {
	out := make([]string, len(macs))
	for i, m := range macs {
		name := "not a lab host"
		if h, ok := s.HostByMAC(m); ok {
			name = h.Name
		}
		out[i] = fmt.Sprintf("%s (%s)", m, name)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// --- HTTP from the client ---------------------------------------------------------

// expectCurls waits until one request to url from the client succeeds, then sends n
// more, 10 at a time, each on a new connection, and requires every one to succeed. It
// returns them counted by Hostname.
func (f *fullLab) expectCurls(tb testing.TB, url string, n int, when string) lab.CurlResult {
	tb.Helper()
	testkit.Eventually(tb, labtest.Wait, labtest.Interval, when+": a first request to "+url+" succeeds", func() error {
		_, err := f.get(tb, url)
		return err
	})
	res := lab.Curl(tb.Context(), f.clientNS, url, n, 10, 3*time.Second)
	if res.OK != n || res.Failed != 0 {
		var b strings.Builder
		res.Print(&b)
		tb.Fatalf("%s: %d of %d requests to %s succeeded; answers by Hostname:\n%s", when, res.OK, n, url, b.String())
	}
	return res
}

// get makes one request to url from the client on a new connection and returns the
// body (whoami's: Hostname, IPs, RemoteAddr, headers).
func (f *fullLab) get(tb testing.TB, url string) (string, error) {
	return labtest.Get(tb.Context(), f.clientNS, url)
}

// whoamiField returns the value of the first line of a whoami answer starting with
// name + ": ".
func whoamiField(body, name string) string {
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), name+": "); ok {
			return v
		}
	}
	return ""
}

// --- Events -------------------------------------------------------------------

// expectEvent waits for an Event of type typ and reason on svc (this very object, by
// UID) whose note satisfies match, and returns the note.
func (f *fullLab) expectEvent(tb testing.TB, svc *corev1.Service, typ, reason string, match func(note string) bool, want string) string {
	tb.Helper()
	var found string
	testkit.Eventually(tb, labtest.Wait, labtest.Interval, fmt.Sprintf("Service %s: a %s Event %s %s", svc.Name, typ, reason, want), func() error {
		evs, err := f.Kube.EventsV1().Events(svc.Namespace).List(tb.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.UID != svc.UID {
				continue
			}
			if e.Type == typ && e.Reason == reason && match(e.Note) {
				found = e.Note
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Note))
		}
		return fmt.Errorf("its Events: %q", seen)
	})
	return found
}

func noteIs(want string) func(string) bool { return func(n string) bool { return n == want } }

func noteHas(parts ...string) func(string) bool {
	return func(n string) bool {
		for _, p := range parts {
			if !strings.Contains(n, p) {
				return false
			}
		}
		return true
	}
}

// --- Pods ---------------------------------------------------------------------

// createPod runs a whoami pod on node with the given labels (and podLabel=name), waits
// until it is Running and Ready, and deletes it when the test ends.
func (f *fullLab) createPod(tb testing.TB, name, node string, labels map[string]string) *corev1.Pod {
	tb.Helper()
	l := map[string]string{podLabel: name}
	for k, v := range labels {
		l[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: l},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "whoami", Image: "traefik/whoami"}}},
	}
	if _, err := f.Kube.CoreV1().Pods("default").Create(tb.Context(), pod, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("creating pod %s: %v", name, err)
	}
	tb.Cleanup(func() { f.deletePod(tb, name) })
	if err := f.waitPodReady(tb.Context(), "default", name); err != nil {
		tb.Fatal(err)
	}
	pod, err := f.Kube.CoreV1().Pods("default").Get(tb.Context(), name, metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return pod
}

// deletePod deletes a pod and waits until it is gone (its agent removed it).
func (f *fullLab) deletePod(tb testing.TB, name string) {
	ctx := context.Background()
	err := f.Kube.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		tb.Errorf("deleting pod %s: %v", name, err)
		return
	}
	// Poll, not eventually: this runs in a Cleanup, after the test's context ended.
	err = testkit.Poll(labWait, 100*time.Millisecond, func() error {
		_, err := f.Kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			err = errors.New("it exists")
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		tb.Errorf("pod %s still there %v after its deletion: %v", name, labWait, err)
	}
}

// --- herald objects -----------------------------------------------------------

// createObject creates a herald object (or any other) and deletes it when the test ends,
// waiting until it is gone: a pool keeps its finalizer until its last IP is released.
func (f *fullLab) createObject(tb testing.TB, obj client.Object) {
	tb.Helper()
	if err := f.c.Create(tb.Context(), obj); err != nil {
		tb.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	tb.Cleanup(func() {
		ctx := context.Background()
		if err := f.c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("deleting %T %s: %v", obj, obj.GetName(), err)
			return
		}
		key := client.ObjectKeyFromObject(obj)
		// Poll, not eventually: this runs in a Cleanup, after the test's context ended.
		err := testkit.Poll(labWait, 100*time.Millisecond, func() error {
			err := f.c.Get(ctx, key, obj)
			if err == nil {
				err = fmt.Errorf("it exists, finalizers %v", obj.GetFinalizers())
			}
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			tb.Errorf("%T %s still there %v after its deletion: %v", obj, key, labWait, err)
		}
	})
}

// getObject reads obj again by its key.
func (f *fullLab) getObject(tb testing.TB, obj client.Object) {
	tb.Helper()
	if err := f.c.Get(tb.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		tb.Fatal(err)
	}
}

// --- faults -------------------------------------------------------------------

// inflict applies a fault and returns its undoing, which runs once, when called or at
// the end of the test.
func inflict(t *testing.T, fault, undo func(context.Context) error) func() {
	t.Helper()
	if err := fault(t.Context()); err != nil {
		t.Fatal(err)
	}
	done := false
	heal := func() {
		if !done {
			done = true
			if err := undo(context.Background()); err != nil {
				t.Errorf("undoing the fault: %v", err)
			}
		}
	}
	t.Cleanup(heal)
	return heal
}

// --- iptables -----------------------------------------------------------------

// natTable is `iptables-save -t nat` on a node.
func (f *fullLab) natTable(tb testing.TB, node string) string {
	tb.Helper()
	out, err := f.s.Exec(tb.Context(), node, "iptables-save", "-t", "nat")
	if err != nil {
		tb.Fatalf("iptables-save on %s: %v", node, err)
	}
	return string(out)
}

// kubeProxyChain is the name kube-proxy's iptables proxier gives the per-service-port
// chains (prefix KUBE-SVC-, KUBE-EXT-, KUBE-FW-, KUBE-SVL-): the prefix and 16
// characters of base32(sha256(servicePortName + protocol)), servicePortName being
// "namespace/name:portName" and protocol in lower case (pkg/proxy/iptables/proxier.go,
// portProtoHash). It is computed here from kube-proxy's definition, not from herald's.
func kubeProxyChain(prefix, servicePortName string, protocol corev1.Protocol) string {
	sum := sha256.Sum256([]byte(servicePortName + strings.ToLower(string(protocol))))
	return prefix + base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// chainsJumpedTo returns the chains the rules of chain jump to whose names start with
// prefix, in an iptables-save dump.
func chainsJumpedTo(dump, chain, prefix string) []string {
	var out []string
	for line := range strings.Lines(dump) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "-A" || f[1] != chain {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if f[i] == "-j" && strings.HasPrefix(f[i+1], prefix) && !slices.Contains(out, f[i+1]) {
				out = append(out, f[i+1])
			}
		}
	}
	return out
}

// hasChain says whether an iptables-save dump declares chain.
func hasChain(dump, chain string) bool {
	for line := range strings.Lines(dump) {
		if strings.HasPrefix(line, ":"+chain+" ") {
			return true
		}
	}
	return false
}

func keyIn(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}
