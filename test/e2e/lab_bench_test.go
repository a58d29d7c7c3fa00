package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/netns"
	"herald.dev/herald/internal/testkit"
)

// BenchmarkLab measures, in the full lab (the walkthrough's cluster with pods and the
// proxier), what a user of the client at 172.18.0.100 waits for, over trials of each
// (HERALD_LAB_TRIALS, default 10):
//
//   - network programming latency: a pod joins a Service (it gets the Service's label,
//     the EndpointSlice controller adds it) → the first request through the VIP that it
//     answers. Measured from the EndpointSlice update as a watch sees it (the SLI
//     kube-proxy's latency is defined by), and from the label change;
//   - Service created → external IP in its status → first ARP reply for it → first
//     successful request through it. The proxiers program the Service when it is
//     created, then its IP when the controller writes it in the status: that second
//     sync waits for the proxier's minimum interval (--iptables-min-sync-period, 1 s,
//     as kube-proxy's), which dominates this figure.
//
// Each trial starts on an idle cluster (no sync within the last 1.5 s).
//
// Requests start from the client every 5 ms (joining pod) or 10 ms (new Service), each
// on a new connection and waiting up to 2 s, whether or not earlier ones ended, so one
// request that stalls does not hide that the path is open: a SYN lost before the path
// was open is sent again only after a second, and a connection from a source port the
// client reuses while the owner's conntrack still holds the previous one in TIME_WAIT
// was seen to stall as long now and then. A pod that joins a Service of two pods
// answers one request in two, so its first answer comes a request or two (milliseconds)
// after it became reachable.
//
// The failover figures are BenchmarkFailover's. Like it, one iteration is the whole
// series, and `make bench` (no -benchtime) runs it once. The table goes to the log
// (`make bench` keeps it in bench.txt) and, with every trial, to bench-lab.txt in the
// lab's run directory.
func BenchmarkLab(b *testing.B) {
	trials := 10
	if v, err := strconv.Atoi(os.Getenv("HERALD_LAB_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	f := fullLabFor(b)
	for b.Loop() {
		var rows []benchRow
		syncs0 := f.syncStats(b)
		rows = append(rows, f.benchProgramming(b, trials)...)
		syncs := f.syncStats(b)
		rows = append(rows, f.benchCreate(b, trials)...)

		// The table goes to the benchmark's log, which `go test` cuts after 10 lines:
		// every trial goes to a file.
		var t, all strings.Builder
		fmt.Fprintf(&t, "full lab (3 workers, proxier), from the client, %d trials: %9s %9s %9s %9s\n", trials, "median", "p95", "min", "max")
		for _, r := range rows {
			med, p95 := testkit.Quantile(r.ds, 0.5), testkit.Quantile(r.ds, 0.95)
			fmt.Fprintf(&t, "  %-58s %9v %9v %9v %9v\n", r.name, med.Round(time.Millisecond), p95.Round(time.Millisecond),
				slices.Min(r.ds).Round(time.Millisecond), slices.Max(r.ds).Round(time.Millisecond))
			if r.metric != "" {
				b.ReportMetric(float64(med.Microseconds())/1000, r.metric+"-median-ms")
				b.ReportMetric(float64(p95.Microseconds())/1000, r.metric+"-p95-ms")
			}
			ms := make([]string, len(r.ds))
			for i, d := range r.ds {
				ms[i] = strconv.FormatInt(d.Milliseconds(), 10)
			}
			fmt.Fprintf(&all, "%-58s %s ms\n", r.name, strings.Join(ms, " "))
		}
		var ss []string
		for _, n := range f.nodes {
			count, sum := syncs[n].count-syncs0[n].count, syncs[n].sum-syncs0[n].sum
			ss = append(ss, fmt.Sprintf("%s %d (mean %v)", n, int(count), time.Duration(sum/max(count, 1)*float64(time.Second)).Round(time.Millisecond)))
		}
		fmt.Fprintf(&t, "  iptables syncs during the %d pod-join trials: %s\n", trials, strings.Join(ss, ", "))
		file := filepath.Join(fullRunDir, "bench-lab.txt")
		if err := os.WriteFile(file, []byte(t.String()+"\nevery trial, in order:\n"+all.String()), 0o644); err != nil {
			b.Error(err)
		}
		fmt.Fprintf(&t, "  this table and every trial: %s", file)
		b.Log(t.String())
	}
}

// syncStat is a herald_proxy_sync_seconds histogram's count and sum, over all modes.
type syncStat struct{ count, sum float64 }

// syncStats reads every worker's proxier sync statistics from its speaker's metrics.
func (f *fullLab) syncStats(b *testing.B) map[string]syncStat {
	out := map[string]syncStat{}
	for _, n := range f.nodes {
		body, err := f.s.Scrape(b.Context(), n)
		if err != nil {
			b.Fatal(err)
		}
		var st syncStat
		for line := range strings.Lines(body) {
			fs := strings.Fields(line)
			if len(fs) != 2 {
				continue
			}
			v, err := strconv.ParseFloat(fs[1], 64)
			switch {
			case err != nil:
			case strings.HasPrefix(fs[0], "herald_proxy_sync_seconds_count"):
				st.count += v
			case strings.HasPrefix(fs[0], "herald_proxy_sync_seconds_sum"):
				st.sum += v
			}
		}
		out[n] = st
	}
	return out
}

type benchRow struct {
	name   string
	metric string // ReportMetric's unit stem; "" for rows only in the table
	ds     []time.Duration
}

// benchProgramming adds webpod2 to a Service of webpod1 (label herald-e2e/bench=on) and
// times until a request through the VIP is answered by webpod2, then takes it out again
// and waits until webpod1 alone answers, trials times.
func (f *fullLab) benchProgramming(b *testing.B, trials int) []benchRow {
	ctx := context.Background() // the cleanup's labelling too
	const label = "herald-e2e/bench"
	setLabel := func(pod string, on bool) {
		v := "null"
		if on {
			v = `"on"`
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, label, v)
		if _, err := f.Kube.CoreV1().Pods("default").Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatalf("labelling pod %s: %v", pod, err)
		}
	}
	setLabel("webpod1", true)
	b.Cleanup(func() { setLabel("webpod1", false); setLabel("webpod2", false) })
	svc := f.createService(b, testkit.LBService("default", "bench-prog",
		webpods, func(s *corev1.Service) { s.Spec.Selector = map[string]string{label: "on"} }))
	vip := f.waitIP(b, svc.Name)
	url := "http://" + vip.String() + "/"
	f.expectCurls(b, url, 10, "bench-prog before the trials")
	pod2, err := f.Kube.CoreV1().Pods("default").Get(b.Context(), "webpod2", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	sw := newSliceWatch(b, f, svc.Name)
	reqs := startStaggered(f.clientNS, url, 5*time.Millisecond, 2*time.Second)
	defer reqs.stop()

	var fromSlice, fromLabel, labelToSlice []time.Duration
	for i := range trials {
		// Only webpod1 answers, and the proxier has not synced for longer than its
		// minimum interval (1 s), which would otherwise delay the next sync.
		if err := reqs.waitOnly("Hostname: webpod1", 20, labWait); err != nil {
			b.Fatalf("trial %d: before webpod2 joins: %v", i+1, err)
		}
		time.Sleep(1500 * time.Millisecond)
		t0 := time.Now()
		setLabel("webpod2", true)
		tSlice, err := sw.waitReady(pod2.Status.PodIP, true, t0, labWait)
		if err != nil {
			b.Fatalf("trial %d: %v", i+1, err)
		}
		tReach, err := reqs.firstAnswer("Hostname: webpod2", t0, labWait)
		if err != nil {
			b.Fatalf("trial %d: webpod2 joined bench-prog's EndpointSlice %v after its label, then: %v", i+1, tSlice.Sub(t0), err)
		}
		fromSlice = append(fromSlice, tReach.Sub(tSlice))
		fromLabel = append(fromLabel, tReach.Sub(t0))
		labelToSlice = append(labelToSlice, tSlice.Sub(t0))

		t1 := time.Now()
		setLabel("webpod2", false)
		if _, err := sw.waitReady(pod2.Status.PodIP, false, t1, labWait); err != nil {
			b.Fatalf("trial %d: webpod2 leaving: %v", i+1, err)
		}
	}
	return []benchRow{
		{"pod label → EndpointSlice updated", "", labelToSlice},
		{"EndpointSlice updated → pod reachable (VIP)", "netprog", fromSlice},
		{"pod label → pod reachable (VIP)", "label-to-reachable", fromLabel},
	}
}

// benchCreate creates a Service of the walkthrough's pods and times until it has an
// IP, until its owner answers ARP and until a request through it succeeds, from a
// client that has never resolved the IP; then deletes it. trials times.
func (f *fullLab) benchCreate(b *testing.B, trials int) []benchRow {
	ctx := b.Context()
	var toIP, toARP, toCurl []time.Duration
	for i := range trials {
		// An idle cluster: no proxier has synced within its minimum interval (1 s),
		// which would otherwise hold back (and batch) the syncs of this Service.
		time.Sleep(1500 * time.Millisecond)
		name := fmt.Sprintf("bench-new-%d", i)
		w, err := f.Kube.CoreV1().Services("default").Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		f.createService(b, testkit.LBService("default", name, webpods))
		var vip netip.Addr
		var tIP time.Time
		timeout := time.After(labWait)
		for !vip.IsValid() {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					b.Fatalf("trial %d: the watch of Service %s ended", i+1, name)
				}
				if s, ok := ev.Object.(*corev1.Service); ok && len(s.Status.LoadBalancer.Ingress) > 0 {
					tIP = time.Now()
					vip = netip.MustParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
				}
			case <-timeout:
				b.Fatalf("trial %d: Service %s got no IP within %v", i+1, name, labWait)
			}
		}
		w.Stop()
		// A fresh client: no neighbour entry for the IP (an earlier trial's Service may
		// have had it).
		_, _ = f.s.Exec(ctx, lab.ClientHost, "ip", "neigh", "flush", "to", vip.String())
		arp := labtest.WatchARP(b, f.clientNS, vip, 10*time.Millisecond)
		reqs := startStaggered(f.clientNS, "http://"+vip.String()+"/", 10*time.Millisecond, 2*time.Second)
		tOK, err := reqs.firstAnswer("", t0, labWait)
		reqs.stop()
		arp.Close()
		if err != nil {
			b.Fatalf("trial %d: Service %s (%s): %v", i+1, name, vip, err)
		}
		tARP, ok := arp.FirstFrom(f.macs[f.owner(vip)], t0)
		if !ok {
			b.Fatalf("trial %d: %s, the owner of %s, never answered ARP; answers from %s", i+1, f.owner(vip), vip, f.describeMACs(arp.MACsSince(t0)))
		}
		toIP = append(toIP, tIP.Sub(t0))
		toARP = append(toARP, tARP.Sub(t0))
		toCurl = append(toCurl, tOK.Sub(t0))

		f.deleteService(b, name)
		f.expectSilence(b, vip, "Service "+name+" deleted")
	}
	return []benchRow{
		{"Service created → external IP", "create-to-ip", toIP},
		{"Service created → owner answers ARP", "create-to-arp", toARP},
		{"Service created → first successful curl", "create-to-curl", toCurl},
	}
}

// requests sends GET requests to a URL from a namespace, each on a new connection,
// and records when each ended and who answered.
type requests struct {
	mu     sync.Mutex
	recs   []reqRec
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type reqRec struct {
	end  time.Time
	host string // the Hostname line, "" when the request failed
	err  error
}

// startStaggered starts a request every interval, whether or not the earlier ones
// ended: a request whose SYN was lost waits a second for TCP to send it again, and the
// requests started meanwhile see the path open as soon as it is.
func startStaggered(ns, url string, interval, timeout time.Duration) *requests {
	ctx, cancel := context.WithCancel(context.Background())
	r := &requests{cancel: cancel}
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true}, Timeout: timeout}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				r.do(ctx, hc, url)
			}()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

// do makes one request and records it; it says whether it succeeded.
func (r *requests) do(ctx context.Context, hc *http.Client, url string) bool {
	host := ""
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := hc.Do(req)
	if err == nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			host = "(no Hostname line)"
			if h := whoamiField(string(body), "Hostname"); h != "" {
				host = "Hostname: " + h
			}
		}
	}
	if ctx.Err() != nil {
		return false // cancelled, not failed
	}
	r.mu.Lock()
	r.recs = append(r.recs, reqRec{end: time.Now(), host: host, err: err})
	r.mu.Unlock()
	return host != ""
}

func (r *requests) stop() {
	r.cancel()
	r.wg.Wait()
}

// firstAnswer waits for the first request ending after t answered by host ("" for
// any successful answer) and returns when it ended.
func (r *requests) firstAnswer(host string, t time.Time, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		r.mu.Lock()
		failed, others, lastErr := 0, map[string]int{}, error(nil)
		for _, rec := range r.recs {
			if !rec.end.After(t) {
				continue
			}
			if rec.host != "" && (host == "" || rec.host == host) {
				r.mu.Unlock()
				return rec.end, nil
			}
			if rec.host == "" {
				failed++
				lastErr = rec.err
			} else {
				others[rec.host]++
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			want := host
			if want == "" {
				want = "any pod"
			}
			return time.Time{}, fmt.Errorf("no request answered by %s within %v: %d failed (the last with %v), others answered by %v", want, limit, failed, lastErr, others)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitOnly waits until the last n requests were all answered by host.
func (r *requests) waitOnly(host string, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		r.mu.Lock()
		var last []string
		if len(r.recs) >= n {
			for _, rec := range r.recs[len(r.recs)-n:] {
				last = append(last, rec.host)
			}
		}
		r.mu.Unlock()
		if len(last) == n && !slices.ContainsFunc(last, func(h string) bool { return h != host }) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the last %d requests were not all answered by %s: %q", n, host, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sliceWatch follows the EndpointSlices of a Service and records when each version of
// them was seen.
type sliceWatch struct {
	mu     sync.Mutex
	events []sliceEvent
}

type sliceEvent struct {
	at    time.Time
	ready map[string]bool // ready endpoint addresses, over all the Service's slices
}

func newSliceWatch(b testing.TB, f *fullLab, service string) *sliceWatch {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	sel := discoveryv1.LabelServiceName + "=" + service
	list, err := f.Kube.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		b.Fatal(err)
	}
	w, err := f.Kube.DiscoveryV1().EndpointSlices("default").Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	sw := &sliceWatch{}
	current := map[string]discoveryv1.EndpointSlice{}
	for _, es := range list.Items {
		current[es.Name] = es
	}
	record := func() {
		ready := map[string]bool{}
		for _, es := range current {
			for _, ep := range es.Endpoints {
				if ptr.Deref(ep.Conditions.Ready, false) {
					for _, a := range ep.Addresses {
						ready[a] = true
					}
				}
			}
		}
		sw.mu.Lock()
		sw.events = append(sw.events, sliceEvent{at: time.Now(), ready: ready})
		sw.mu.Unlock()
	}
	record()
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			es, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			if ev.Type == "DELETED" {
				delete(current, es.Name)
			} else {
				current[es.Name] = *es
			}
			record()
		}
	}()
	return sw
}

// waitReady waits for the first version of the slices seen after t in which ip is a
// ready endpoint (or, with ready false, is not) and returns when it was seen.
func (sw *sliceWatch) waitReady(ip string, ready bool, t time.Time, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		sw.mu.Lock()
		for _, ev := range sw.events {
			if ev.at.After(t) && ev.ready[ip] == ready {
				sw.mu.Unlock()
				return ev.at, nil
			}
		}
		sw.mu.Unlock()
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the EndpointSlices never had %s ready=%v within %v", ip, ready, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
