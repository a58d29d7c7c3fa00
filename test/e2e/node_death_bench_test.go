package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/netns"
	"herald.dev/herald/internal/testkit"
)

// BenchmarkNodeDeath measures what a user of the walkthrough's Services feels when a
// node running one of their pods dies: the client requests every VIP (svc1..svc3,
// externalTrafficPolicy Cluster, endpoints webpod1 on worker and webpod2 on worker2)
// ten times a second, worker's cable is pulled, and measureNodeDeath reports how long
// requests kept failing, which fraction failed, and when the API server saw the Node
// NotReady; then the cable goes back and everything is waited for to be ready again.
//
// Two series in one sitting: "herald", as installed (dead nodes' endpoints withheld),
// over a 15 s window, HERALD_NODE_DEATH_TRIALS trials (default 10); and
// "without-withholding", every speaker restarted with --withhold-dead-endpoints=false
// (the behaviour of kube-proxy and of herald before), over a window that lasts until
// the Node is NotReady and at least 90 s, HERALD_NODE_DEATH_BASELINE_TRIALS trials
// (default 3, two minutes each; 0 skips it). Run it with -benchtime=1x.
//
//	go test -count=1 -run '^$' -bench BenchmarkNodeDeath -benchtime=1x -timeout 60m ./test/e2e/
func BenchmarkNodeDeath(b *testing.B) {
	trials := envInt("HERALD_NODE_DEATH_TRIALS", 10)
	baseline := envInt("HERALD_NODE_DEATH_BASELINE_TRIALS", 3)
	f := fullLabFor(b)
	var vips []netip.Addr
	for _, name := range walkthrough {
		vips = append(vips, f.vips[name])
	}
	series := func(b *testing.B, n int, window time.Duration, untilNotReady bool) {
		for b.Loop() {
			var results []nodeDeathResult
			for i := range n {
				f.rebalanceAll(b)
				for _, name := range walkthrough {
					f.expectOwner(b, f.vips[name], f.owner(f.vips[name]), name+" before the trial")
				}
				res, err := measureNodeDeathFor(b.Context(), f.Lab, "worker", vips, linkDownFault, window, untilNotReady)
				if err != nil {
					b.Fatalf("trial %d: %v", i+1, err)
				}
				b.Logf("trial %d: %s", i+1, res)
				results = append(results, res)
			}
			reportNodeDeath(b, results, len(vips))
		}
	}
	b.Run("herald", func(b *testing.B) { series(b, trials, 15*time.Second, false) })
	if baseline == 0 {
		return
	}
	b.Run("without-withholding", func(b *testing.B) {
		args := f.s.SpeakerArgs
		f.restartSpeakers(b, append(slices.Clone(args), "--withhold-dead-endpoints=false"))
		defer f.restartSpeakers(b, args)
		series(b, baseline, nodeDeathWindow, true)
	})
}

// restartSpeakers restarts every speaker, one after the other, with args as their
// extra flags (a restart moves no VIP).
func (f *fullLab) restartSpeakers(tb testing.TB, args []string) {
	tb.Helper()
	f.s.SpeakerArgs = args
	for _, n := range f.nodes {
		if err := f.s.StopSpeaker(n); err != nil {
			tb.Fatal(err)
		}
		if err := f.s.StartSpeaker(tb.Context(), n); err != nil {
			tb.Fatal(err)
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

// reportNodeDeath reports the medians and 95th percentiles of a series of trials;
// failed-s is the seconds of failed requests per VIP (failed requests over the rate),
// comparable across windows.
func reportNodeDeath(b *testing.B, results []nodeDeathResult, vips int) {
	metric := func(name, unit string, get func(nodeDeathResult) float64) {
		var vs []float64
		for _, r := range results {
			vs = append(vs, get(r))
		}
		med, p95 := testkit.Quantile(vs, 0.5), testkit.Quantile(vs, 0.95)
		b.ReportMetric(med, name+"-median-"+unit)
		b.ReportMetric(p95, name+"-p95-"+unit)
		b.Logf("node death: %-14s trials=%d median=%.3g p95=%.3g max=%.3g %s", name, len(vs), med, p95, slices.Max(vs), unit)
	}
	metric("last-failure", "s", func(r nodeDeathResult) float64 { return r.LastFailure.Seconds() })
	metric("failed", "fraction", func(r nodeDeathResult) float64 { return r.FailedFraction() })
	metric("failed-s", "s", func(r nodeDeathResult) float64 {
		return float64(r.Failed) / float64(vips) * nodeDeathRate.Seconds()
	})
	metric("notready", "s", func(r nodeDeathResult) float64 { return r.NotReady.Seconds() })
	metric("recovery", "s", func(r nodeDeathResult) float64 { return r.Recovery.Seconds() })
}

// nodeFault is a way for a node to die, and to come back.
type nodeFault struct {
	Name             string
	Inflict, Restore func(ctx context.Context, s *lab.State, node string) error
}

// linkDownFault pulls the node's cable: the node and its pods are cut off, and its agent
// (the kubelet stand-in) can no longer renew its Lease.
var linkDownFault = nodeFault{Name: lab.FaultLinkDown,
	Inflict: func(ctx context.Context, s *lab.State, n string) error { return s.LinkDown(ctx, n) },
	Restore: func(ctx context.Context, s *lab.State, n string) error { return s.LinkUp(ctx, n) },
}

// killNodeFault kills the node as a whole (lab.KillNode): cable out, agent and speaker
// killed; StartNode boots it again.
var killNodeFault = nodeFault{Name: "kill-node",
	Inflict: func(ctx context.Context, s *lab.State, n string) error { return s.KillNode(ctx, n) },
	Restore: func(ctx context.Context, s *lab.State, n string) error { return s.StartNode(ctx, n) },
}

// shutdownNodeFault shuts the node down the way systemd does: its speaker gets SIGTERM
// and says goodbye to its peers (as for a restart), and once it has exited the node
// goes as KillNode takes it (cable out, agent and pods killed). StartNode boots it.
var shutdownNodeFault = nodeFault{Name: "shutdown",
	Inflict: func(ctx context.Context, s *lab.State, n string) error {
		if err := s.StopSpeaker(n); err != nil {
			return err
		}
		return s.KillNode(ctx, n)
	},
	Restore: func(ctx context.Context, s *lab.State, n string) error { return s.StartNode(ctx, n) },
}

// Bounds of one measurement. The window is long enough for today's behaviour (the node
// lifecycle controller marks a silent node's pods not ready after 50 s, then the
// EndpointSlice and the proxiers follow), and the same for every trial, so that the
// fractions of failed requests compare.
const (
	nodeDeathRate      = 100 * time.Millisecond // per VIP: ten requests a second
	nodeDeathTimeout   = 500 * time.Millisecond // per request
	nodeDeathWindow    = 90 * time.Second       // requests measured after the fault
	nodeDeathMaxWindow = 3 * time.Minute        // the window is stretched until the Node is NotReady, up to this
	nodeDeathReady     = 2 * time.Second        // of unbroken success per VIP counts as ready
)

// nodeDeathResult is what the client and the API server saw of one node's death. Times
// are from the moment the fault was in effect (the command inflicting it returned).
type nodeDeathResult struct {
	Node  string
	Fault string
	// At is when the fault was in effect, to read beside the components' logs.
	At time.Time
	// Requests and Failed count the client's requests to every VIP that started in the
	// window after the fault (Window long).
	Requests, Failed int
	Window           time.Duration
	// LastFailure is when the last request that failed in the window started, zero when
	// none failed.
	LastFailure time.Duration
	// LastFailureByVIP is LastFailure of each VIP's requests.
	LastFailureByVIP map[netip.Addr]time.Duration
	// NotReady is when the API server first showed the Node's Ready condition other
	// than True (polled every 500 ms); zero if it never did within the window.
	NotReady time.Duration
	// Recovery is from the fault's undoing until the Node and every pod on it were
	// Ready again and every VIP answered nodeDeathReady without a failure.
	Recovery time.Duration
}

// FailedFraction is the fraction of the window's requests that failed.
func (r nodeDeathResult) FailedFraction() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Failed) / float64(r.Requests)
}

func (r nodeDeathResult) String() string {
	notReady := "never within the window"
	if r.NotReady > 0 {
		notReady = fmt.Sprintf("after %.1f s", r.NotReady.Seconds())
	}
	return fmt.Sprintf("%s of %s at %s: last failed request started %.1f s after the fault (by VIP %v), %d of %d requests failed (%.1f%%) in %v; Node NotReady %s; all ready again %.1f s after the fault was undone",
		r.Fault, r.Node, r.At.UTC().Format("15:04:05.000"), r.LastFailure.Seconds(), secondsByVIP(r.LastFailureByVIP), r.Failed, r.Requests, 100*r.FailedFraction(), r.Window, notReady, r.Recovery.Seconds())
}

func secondsByVIP(m map[netip.Addr]time.Duration) map[string]string {
	out := map[string]string{}
	for ip, d := range m {
		out[ip.String()] = fmt.Sprintf("%.1fs", d.Seconds())
	}
	return out
}

// measureNodeDeath waits until every VIP answers the client, inflicts fault on node
// while the client requests each VIP every nodeDeathRate (each GET on a new connection,
// nodeDeathTimeout at most), counts the requests of the nodeDeathWindow after the fault
// (stretched until the API server shows the Node NotReady, up to nodeDeathMaxWindow),
// then undoes the fault and waits until the Node, its pods and every VIP are ready
// again. The fault is undone even when the measurement fails.
func measureNodeDeath(ctx context.Context, l *lab.Lab, node string, vips []netip.Addr, fault nodeFault) (nodeDeathResult, error) {
	return measureNodeDeathFor(ctx, l, node, vips, fault, nodeDeathWindow, true)
}

// measureNodeDeathFor is measureNodeDeath with a window of its own, stretched until the
// Node is NotReady only when untilNotReady is set.
func measureNodeDeathFor(ctx context.Context, l *lab.Lab, node string, vips []netip.Addr, fault nodeFault, window time.Duration, untilNotReady bool) (res nodeDeathResult, err error) {
	res = nodeDeathResult{Node: node, Fault: fault.Name, LastFailureByVIP: map[netip.Addr]time.Duration{}}
	client, err := l.State.Host(lab.ClientHost)
	if err != nil {
		return res, err
	}
	if err := waitVIPsAnswer(ctx, client.Namespace, vips); err != nil {
		return res, fmt.Errorf("before the fault: %w", err)
	}
	load := startVIPLoad(client.Namespace, vips)
	defer load.stop()

	if err := fault.Inflict(ctx, l.State, node); err != nil {
		return res, fmt.Errorf("%s of %s: %w", fault.Name, node, err)
	}
	at := time.Now()
	res.At = at
	restored := false
	defer func() {
		if !restored {
			if rerr := fault.Restore(context.Background(), l.State, node); rerr != nil {
				err = fmt.Errorf("%w; undoing %s of %s: %v", err, fault.Name, node, rerr)
			}
		}
	}()
	for {
		if res.NotReady == 0 {
			n, err := l.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return res, fmt.Errorf("reading Node %s: %w", node, err)
			}
			if !nodeIsReady(n) {
				res.NotReady = time.Since(at)
			}
		}
		elapsed := time.Since(at)
		if elapsed >= nodeDeathMaxWindow || elapsed >= window && (res.NotReady > 0 || !untilNotReady) {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	res.Window = time.Since(at)
	load.stop()
	for _, r := range load.results() {
		if r.start.Before(at) || !r.start.Before(at.Add(res.Window)) {
			continue
		}
		res.Requests++
		if !r.ok {
			res.Failed++
			since := r.start.Sub(at)
			res.LastFailure = max(res.LastFailure, since)
			res.LastFailureByVIP[r.vip] = max(res.LastFailureByVIP[r.vip], since)
		}
	}

	restored = true
	undone := time.Now()
	if err := fault.Restore(ctx, l.State, node); err != nil {
		return res, fmt.Errorf("undoing %s of %s: %w", fault.Name, node, err)
	}
	if err := waitNodeAndPodsReady(ctx, l, node); err != nil {
		return res, fmt.Errorf("after undoing %s: %w", fault.Name, err)
	}
	if err := waitVIPsAnswer(ctx, client.Namespace, vips); err != nil {
		return res, fmt.Errorf("after undoing %s: %w", fault.Name, err)
	}
	res.Recovery = time.Since(undone)
	return res, nil
}

func nodeIsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitNodeAndPodsReady waits until the Node is Ready and every pod on it Running and
// Ready, as the API server says.
func waitNodeAndPodsReady(ctx context.Context, l *lab.Lab, node string) error {
	return testkit.Poll(labWait, 500*time.Millisecond, func() error {
		n, err := l.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeIsReady(n) {
			return fmt.Errorf("Node %s not Ready: %v", node, n.Status.Conditions)
		}
		pods, err := l.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || !podReady(&p) {
				return fmt.Errorf("pod %s/%s on %s: phase %s, conditions %v", p.Namespace, p.Name, node, p.Status.Phase, p.Status.Conditions)
			}
		}
		return nil
	})
}

// waitVIPsAnswer waits until every VIP has answered the client without a failure for
// nodeDeathReady.
func waitVIPsAnswer(ctx context.Context, ns string, vips []netip.Addr) error {
	load := startVIPLoad(ns, vips)
	defer load.stop()
	return testkit.Poll(labWait, 500*time.Millisecond, func() error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		since := time.Now().Add(-nodeDeathReady)
		if load.begun.After(since) {
			return fmt.Errorf("requests started %v ago only", time.Since(load.begun))
		}
		for _, vip := range vips {
			n, failed := 0, 0
			for _, r := range load.results() {
				if r.vip == vip && r.start.After(since) && !r.end.IsZero() {
					n++
					if !r.ok {
						failed++
					}
				}
			}
			if n == 0 || failed > 0 {
				return fmt.Errorf("%s: %d of %d requests in the last %v failed", vip, failed, n, nodeDeathReady)
			}
		}
		return nil
	})
}

// vipLoad requests every VIP every nodeDeathRate from a namespace, each GET on a new
// connection and bounded by nodeDeathTimeout, whether or not the one before answered,
// as a steady stream of users would.
type vipLoad struct {
	begun  time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	mu     sync.Mutex
	done   []vipRequest
}

type vipRequest struct {
	vip        netip.Addr
	start, end time.Time
	ok         bool
}

func startVIPLoad(ns string, vips []netip.Addr) *vipLoad {
	ctx, cancel := context.WithCancel(context.Background())
	v := &vipLoad{begun: time.Now(), cancel: cancel}
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true}, Timeout: nodeDeathTimeout}
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		t := time.NewTicker(nodeDeathRate)
		defer t.Stop()
		for {
			for _, vip := range vips {
				v.wg.Add(1)
				go func() {
					defer v.wg.Done()
					r := vipRequest{vip: vip, start: time.Now()}
					r.ok = getVIP(ctx, hc, lab.VIPURL(vip)) == nil
					r.end = time.Now()
					if ctx.Err() != nil && !r.ok {
						return // cut short by stop: not the VIP's failure
					}
					v.mu.Lock()
					v.done = append(v.done, r)
					v.mu.Unlock()
				}()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return v
}

// getVIP is one request: a 200 with a whole body is a success.
func getVIP(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// stop ends the requests and waits for those under way.
func (v *vipLoad) stop() {
	v.once.Do(func() {
		v.cancel()
		v.wg.Wait()
	})
}

// results are the requests that ended so far.
func (v *vipLoad) results() []vipRequest {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.done)
}
