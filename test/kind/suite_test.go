//go:build kind

package kind

// The tests, in the order they run (go test runs a file's tests in source order). Each
// makes sure of the install it needs (ensureKustomize), so any one runs alone with
// -run; run together they share one install until TestHelm replaces it.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/cmd/herald/app"
)

// The walkthrough's outcome with herald installed from config/kind on a cluster with
// no kube-proxy: svc1..svc3 get 172.18.255.200-202, 100 of 100 curls from the client
// succeed on each, both webpods answer, and exactly one MAC answers ARP for each VIP,
// that of the node container the VIPStatus names. Inside the cluster, herald's proxier
// is the only Service proxy: a pod resolves names through CoreDNS's ClusterIP and
// reaches the `kubernetes` Service and svc1 by name.
func TestWalkthrough(t *testing.T) {
	ensureKustomize(t)
	if got := vipsNow(t); !slices.Equal(got, wantVIPs) {
		t.Errorf("svc1..svc3 got %v, want %v (the walkthrough's)", got, wantVIPs)
	}
	checkServed(t, 100)

	// From inside: DNS through CoreDNS's ClusterIP, the API server through the
	// `kubernetes` ClusterIP, svc1 by name; all of it is herald's proxier's doing.
	out := podRun(t, "incluster", `set -e
dig +short +time=2 +tries=3 kubernetes.default.svc.cluster.local
curl -sk --max-time 5 -o /dev/null -w '%{http_code}\n' https://kubernetes.default.svc/readyz
curl -s --max-time 5 http://svc1.default.svc.cluster.local/ | sed -n 's/^Hostname: //p'`)
	lines := strings.Fields(out)
	kubeIP := k(t, "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
	if len(lines) != 3 || lines[0] != kubeIP || lines[1] != "200" || !strings.HasPrefix(lines[2], "webpod") {
		t.Errorf("from a pod: got %q, want the `kubernetes` ClusterIP %s from CoreDNS, 200 from its /readyz, a webpod from svc1", out, kubeIP)
	}
	if ds := k(t, "-n", "kube-system", "get", "daemonset", "kube-proxy", "--ignore-not-found", "-o", "name"); ds != "" {
		t.Errorf("kube-proxy runs (%s): the suite's cluster must have none", ds)
	}
}

// podRun runs script in a pod of the netshoot image on a worker and returns its output.
func podRun(t testing.TB, name, script string) string {
	t.Helper()
	k(t, "delete", "pod", name, "--ignore-not-found", "--wait")
	k(t, "run", name, "--image", e.netshoot, "--restart=Never", "--image-pull-policy=Never",
		"--overrides", fmt.Sprintf(`{"spec":{"nodeName":%q}}`, e.cluster+"-worker3"), "--command", "--", "sh", "-c", script)
	defer k(t, "delete", "pod", name, "--wait=false")
	waitUntil(t, 2*time.Minute, "pod "+name+" to finish", func() (bool, string) {
		phase := k(t, "get", "pod", name, "-o", "jsonpath={.status.phase}")
		return phase == "Succeeded" || phase == "Failed", phase
	})
	out := k(t, "logs", name)
	if phase := k(t, "get", "pod", name, "-o", "jsonpath={.status.phase}"); phase != "Succeeded" {
		t.Errorf("pod %s: %s: %s", name, phase, out)
	}
	return out
}

// `herald status` (bin/herald) against the cluster's API server with kind's kubeconfig
// context: one row per walkthrough Service, the owner and MAC being those that answer
// ARP.
func TestHeraldStatus(t *testing.T) {
	ensureKustomize(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	table, err := run(ctx, e.herald, "status", "--context", "kind-"+e.cluster)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("herald status:\n%s", table)
	if h := strings.Fields(strings.SplitN(table, "\n", 2)[0]); strings.Join(h, " ") != "NAMESPACE SERVICE VIP OWNER NODE MAC SINCE LEADER CHANGES POOL" {
		t.Errorf("herald status header: %q", h)
	}
	js, err := run(ctx, e.herald, "status", "--context", "kind-"+e.cluster, "-n", "default", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep app.StatusReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("herald status -o json: %v:\n%s", err, js)
	}
	macs := nodeMACs(t)
	for i, svc := range walkthrough {
		ip := serviceIP(t, svc)
		owner := arpOwner(t, ip)
		var row *app.VIPRow
		for j, r := range rep.Items {
			if r.Service == svc && r.VIP == ip {
				row = &rep.Items[j]
			}
		}
		switch {
		case row == nil:
			t.Errorf("herald status has no row for default/%s (%s):\n%s", svc, ip, js)
		case row.OwnerNode != owner || macs[strings.ToLower(row.MAC)] != owner || row.Pool != "my-ippool" || !row.Published:
			t.Errorf("herald status row of %s: %+v; want owner %s (who answers ARP) with its MAC, pool my-ippool", svc, *row, owner)
		}
		if ip != wantVIPs[i] {
			t.Errorf("%s has %s, want %s", svc, ip, wantVIPs[i])
		}
	}
}

// docker stop of the node container that owns svc1's VIP: the client's curls are
// answered again through another node, which alone answers ARP; the node goes
// NotReady as a real kubelet's does. Figures are logged (time to first success, how
// long the node took to go NotReady); afterwards the container is started again, the
// static CNI's routes restored, and the walkthrough works as before.
func TestFailoverDockerStop(t *testing.T) {
	failover(t, "svc1", "stop")
}

// docker pause of the node container that owns svc2's VIP: its speaker freezes
// without a goodbye (no SIGTERM), the way a hung or cut-off node looks. After the
// unpause, exactly one node answers ARP again.
func TestFailoverDockerPause(t *testing.T) {
	failover(t, "svc2", "pause")
}

// TestDrainDockerStop drains the node that owns svc1's VIP (kubectl drain: cordoned,
// its webpod evicted), as before a kernel upgrade, then stops its container (the
// reboot). The cordon hands the VIP over make-before-break, so the client, curling
// every 50 ms, sees no failed request from the drain to the end. Afterwards the node
// runs again, is uncordoned and gets its webpod back; the VIP stays where it went.
func TestDrainDockerStop(t *testing.T) {
	ensureKustomize(t)
	owners := checkServed(t, 10)
	vip := serviceIP(t, "svc1")
	node := owners[vip]
	p := startProbe(t, vip, 4*time.Minute, 40)
	restored := false
	next := ""
	restore := func() {
		if restored {
			return
		}
		restored = true
		restoreNode(t, node, "stop", vip, next)
		k(t, "uncordon", node)
		time.Sleep(3 * time.Second) // the speakers elect on the uncordon
		if now := arpOwner(t, vip); next != "" && now != next {
			t.Errorf("after %s was uncordoned, ARP for %s is answered by %s, want %s (no fail-back)", node, vip, now, next)
		}
		// The evicted webpod back (walkthroughObjects deletes both webpods first: svc1
		// has no endpoint for a moment and goes wherever the hash places it).
		walkthroughObjects(t)
	}
	defer restore() // not t.Cleanup: t.Context, which the helpers use, ends before cleanups

	t0 := time.Now()
	k(t, "drain", node, "--ignore-daemonsets", "--force", "--delete-emptydir-data", "--timeout=2m")
	drained := time.Since(t0)
	waitUntil(t, 10*time.Second, "another node answering ARP for "+vip+" after the drain of "+node, func() (bool, string) {
		next = arpOwner(t, vip)
		return next != "" && next != node, next
	})
	time.Sleep(5 * time.Second) // the operator's tooling, then the reboot
	stopped := time.Now()
	docker(t, "stop", node)
	p.faultInPlace()
	o := summarize(p.wait(), t0)
	t.Logf("FIGURE drain-stop: kubectl drain %s took %.1fs, docker stop at +%.1fs; %s moved to %s; the client saw: %s",
		node, drained.Seconds(), stopped.Sub(t0).Seconds(), vip, next, o)
	if o.failed > 0 {
		t.Errorf("%d of %d requests to %s failed after kubectl drain %s (the first at +%.2fs, the last at +%.2fs); a drained node's VIPs move before it stops",
			o.failed, o.attempts, vip, node, o.firstFail.Seconds(), o.lastFail.Seconds())
	}
	t.Logf("Events of svc1: %s", cmp(k(t, "get", "events", "--field-selector", "involvedObject.name=svc1",
		"-o", `jsonpath={range .items[*]}{.reason}: {.note}{.message}{"\n"}{end}`), "none"))
	restore()
}

func failover(t *testing.T, svc, fault string) {
	ensureKustomize(t)
	owners := checkServed(t, 10)
	vip := serviceIP(t, svc)
	node := owners[vip]
	macs := nodeMACs(t)
	oldMAC := ""
	for m, n := range macs {
		if n == node {
			oldMAC = m
		}
	}
	pods := map[string]string{} // webpod by node
	for _, l := range strings.Split(k(t, "get", "pod", "-l", "app=webpod", "-o", `jsonpath={range .items[*]}{.spec.nodeName} {.metadata.name}{"\n"}{end}`), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			pods[f[0]] = f[1]
		}
	}
	t.Logf("%s: %s is owned by %s (%s), which runs webpod %q", svc, vip, node, oldMAC, pods[node])

	p := startProbe(t, vip, 4*time.Minute, 20)
	notReady := watchNotReady(t, node)
	restored := false
	next := "" // who answers ARP for vip once the fault is in place
	restore := func() {
		if !restored {
			restored = true
			restoreNode(t, node, fault, vip, next)
		}
	}
	// Deferred, not t.Cleanup: t.Context, which the helpers use, ends before cleanups.
	defer restore()

	t0 := time.Now()
	docker(t, fault, node)
	took := time.Since(t0)
	p.faultInPlace()
	o := summarize(p.wait(), t0)
	t.Logf("docker %s %s took %.1fs; the client saw: %s", fault, node, took.Seconds(), o)
	if o.recovered < 0 {
		t.Fatalf("%s never answered again after docker %s %s", vip, fault, node)
	}
	if outage := o.recovered - took; outage > failoverBound {
		t.Errorf("requests to %s failed until %.2fs after docker %s %s had returned (the first success after the last failure); they must succeed again within %v (the speakers withhold a node that is down, and move its VIPs)",
			vip, outage.Seconds(), fault, node, failoverBound)
	}
	next = arpOwner(t, vip)
	if next == node {
		t.Errorf("after docker %s %s, ARP for %s is still answered by it", fault, node, vip)
	}
	t.Logf("FIGURE docker-%s: %s answered again %.2fs after the fault began (first success after the first failure), without a failure from +%.2fs (the webpod of %s, %q, counted until then), now owned by %s; %d of %d requests failed",
		fault, vip, o.answered.Seconds(), o.recovered.Seconds(), node, pods[node], next, o.failed, o.attempts)
	st := vipStatuses(t)[vip]
	t.Logf("VIPStatus of %s: %+v", vip, st)

	// The node lifecycle, which the lab has no kubelet for.
	select {
	case d := <-notReady:
		if d < 0 {
			t.Errorf("%s never went NotReady in %s after docker %s", node, nodeNotReadyWait, fault)
		} else {
			t.Logf("FIGURE node-notready-%s: %s went NotReady %.0fs after docker %s", fault, node, d.Seconds(), fault)
		}
	case <-t.Context().Done():
	}
	// Whether the speakers held the node dead before the API server did (no goodbye
	// from its speaker, nothing on it answering).
	t.Logf("herald's Events on %s since the fault: %s", node, cmp(strings.Join(nodeEventsSince(t, node, t0, "EndpointsWithheld", "EndpointsRestored"), "; "), "none"))

	restore()
	owners = checkServed(t, 20)
	t.Logf("after %s came back: owners %v", node, owners)
}

// failoverBound is how long after the owner's node container stopped or froze (the
// docker command returned) the client's requests may still fail: until the first
// success after the last failure. It is a few times the failover the docs state, plus
// one request's time-out, so a busy machine passes, and far below waiting for the
// Node to go NotReady (what happened before herald withheld the endpoints of nodes
// that shut down or freeze) or memberlist's default timings.
const failoverBound = 3 * time.Second

const nodeNotReadyWait = 3 * time.Minute

// watchNotReady reports how long after now the node's Ready condition left True, or
// -1 when it did not within nodeNotReadyWait.
func watchNotReady(t testing.TB, node string) <-chan time.Duration {
	ch := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		for time.Since(start) < nodeNotReadyWait && t.Context().Err() == nil {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			st, err := kubectl(ctx, "get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			cancel()
			if err == nil && st != "True" {
				ch <- time.Since(start)
				return
			}
			time.Sleep(time.Second)
		}
		ch <- -1
	}()
	return ch
}

// restoreNode undoes docker stop or pause: the container runs again, the static CNI's
// routes and masquerade rule are restored (a restarted node has none), and the node,
// its speaker and the webpods are Ready.
// restoreNode undoes the fault. After an unpause, the thawed node must not answer ARP
// for vip (standIn, when known, took it over and keeps it: no fail-back), and never two
// MACs at once.
func restoreNode(t testing.TB, node, fault, vip, standIn string) {
	t.Helper()
	start := time.Now()
	ip0 := ""
	if fault == "pause" {
		docker(t, "unpause", node)
		// The thawed speaker still believes it owns vip until memberlist tells it
		// otherwise: sample who answers ARP for a while and say whether two did.
		names := nodeMACs(t)
		most, seen := 0, map[string]int{}
		for time.Since(start) < 15*time.Second {
			macs := arpMACs(t, vip, 3)
			most = max(most, len(macs))
			for m, n := range macs {
				seen[m] += n
			}
		}
		t.Logf("FIGURE unpause-arp: in the 15s after docker unpause %s, at most %d MAC(s) answered ARP for %s at once; replies by MAC: %s",
			node, most, vip, describeMACs(seen, names))
		if most > 1 {
			t.Errorf("after docker unpause %s, %d MACs answered ARP for %s at once", node, most, vip)
		}
		for m := range seen {
			if names[m] == node && standIn != "" {
				t.Errorf("after docker unpause %s, it answered ARP for %s again (%d replies): it took the VIP back from %s",
					node, vip, seen[m], standIn)
			}
		}
	} else {
		docker(t, "start", node)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(e.root, "hack", "kind", "static-cni.sh"), e.cluster, "10.10.0.0/16")
		cmd.Env = append(cmd.Environ(), "KUBECTL="+e.kubectl)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("static-cni.sh after restarting %s: %v: %s", node, err, out)
		}
	}
	ip0, _ = nodeIP(t.Context(), node)
	k(t, "wait", "--for=condition=Ready", "node/"+node, "--timeout=3m")
	ready := time.Since(start)
	waitUntil(t, 3*time.Minute, "herald's speaker on "+node+" Ready", func() (bool, string) {
		out := k(t, "-n", heraldNS, "get", "pod", "-l", "app.kubernetes.io/component=speaker", "--field-selector", "spec.nodeName="+node,
			"-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{end}`)
		return out == "True", out
	})
	k(t, "wait", "--for=condition=Ready", "pod", "-l", "app=webpod", "--timeout=3m")
	t.Logf("FIGURE restore-%s: %s (%s) Ready %.0fs after docker %s, its speaker and the webpods %.0fs",
		fault, node, ip0, ready.Seconds(), map[string]string{"pause": "unpause", "stop": "start"}[fault], time.Since(start).Seconds())
}

// The Helm path on the real cluster: herald from config/kind removed (CRDs and all),
// `helm install` of charts/herald into a namespace labelled as its README says, with
// the values this cluster needs (apiServer.host: no kube-proxy; the pod CIDR), the
// walkthrough again; `helm upgrade` rolling every speaker (a new log level) while the
// client curls svc1, not one request failing; `helm uninstall`, which keeps the CRDs and the pool, and leaves
// no node answering ARP for the VIPs.
func TestHelm(t *testing.T) {
	uninstall(t)
	kApply(t, `apiVersion: v1
kind: Namespace
metadata:
  name: `+heraldNS+`
  labels:
    pod-security.kubernetes.io/enforce: privileged
    pod-security.kubernetes.io/audit: privileged
    pod-security.kubernetes.io/warn: privileged
`)
	chart := filepath.Join(e.root, "charts", "herald")
	start := time.Now()
	helm(t, "install", "herald", chart, "--set", "apiServer.host="+e.cpIP, "--set", "speaker.proxy.clusterCIDR={10.10.0.0/16}",
		"--set", "controller.image.tag=dev", "--set", "speaker.image.tag=dev", "--wait", "--timeout", "5m")
	installed = "helm"
	waitRollouts(t)
	t.Logf("FIGURE helm-install: %.0fs to every herald pod and CoreDNS ready", time.Since(start).Seconds())
	walkthroughObjects(t)
	if got := vipsNow(t); !slices.Equal(got, wantVIPs) {
		t.Errorf("svc1..svc3 got %v after helm install, want %v", got, wantVIPs)
	}
	checkServed(t, 20)

	// An upgrade that changes the speakers' pod template rolls them one node at a time,
	// owners included: the client curls svc1 all along.
	vip := serviceIP(t, "svc1")
	p := startProbe(t, vip, 5*time.Minute, 20)
	t0 := time.Now()
	helm(t, "upgrade", "herald", chart, "--reuse-values", "--set", "speaker.logLevel=1", "--wait", "--timeout", "5m")
	k(t, "-n", heraldNS, "rollout", "status", "daemonset/herald-speaker", "--timeout=5m")
	took := time.Since(t0)
	p.faultInPlace()
	o := summarize(p.wait(), t0)
	t.Logf("FIGURE helm-upgrade: speakers rolled in %.0fs; svc1 (%s) from the client: %s", took.Seconds(), vip, o)
	// The peers hold a restarting speaker's VIPs and its node keeps serving them: a
	// rolling upgrade costs the client no request.
	if o.attempts == 0 || o.failed != 0 {
		t.Errorf("helm upgrade: %d of %d requests to svc1 (%s) failed while the speakers rolled; want none (and some sent)", o.failed, o.attempts, vip)
	}
	var rel struct {
		Version int `json:"version"`
		Info    struct {
			Status string `json:"status"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(helm(t, "status", "herald", "-o", "json")), &rel); err != nil {
		t.Fatalf("helm status -o json: %v", err)
	}
	if rel.Version != 2 || rel.Info.Status != "deployed" {
		t.Errorf("release after one upgrade: revision %d, %s; want revision 2, deployed", rel.Version, rel.Info.Status)
	}
	args := k(t, "-n", heraldNS, "get", "daemonset", "herald-speaker", "-o", "jsonpath={.spec.template.spec.containers[0].args}")
	if !strings.Contains(args, "--v=1") {
		t.Errorf("speaker args after the upgrade: %s, want --v=1", args)
	}
	checkServed(t, 20)

	helm(t, "uninstall", "herald", "--wait", "--timeout", "5m")
	installed = ""
	// helm uninstall --wait waits for the workloads to go, not for their pods, which
	// terminate gracefully (a speaker leaves memberlist first).
	gone := waitUntil(t, 2*time.Minute, "every herald pod gone after helm uninstall", func() (bool, string) {
		pods := k(t, "-n", heraldNS, "get", "pods", "-l", "app.kubernetes.io/name=herald", "-o", "name")
		return pods == "", pods
	})
	t.Logf("herald's pods gone %.0fs after helm uninstall returned", gone.Seconds())
	if crds := k(t, "get", "crd", "-o", "name"); !strings.Contains(crds, "ipaddresspools.herald.dev") {
		t.Errorf("CRDs after helm uninstall (crds.keep): %s, want herald's kept", crds)
	}
	if pool := k(t, "-n", heraldNS, "get", "ipaddresspools", "-o", "name"); pool != "ipaddresspool.herald.dev/my-ippool" {
		t.Errorf("pools after helm uninstall: %q, want my-ippool kept with the CRDs", pool)
	}
	for _, ip := range wantVIPs {
		waitUntil(t, 30*time.Second, "no node answering ARP for "+ip+" after helm uninstall", func() (bool, string) {
			macs := arpMACs(t, ip, 3)
			return len(macs) == 0, describeMACs(macs, nodeMACs(t))
		})
	}
}

// helm runs bin/helm on the cluster in herald's namespace and fails the test on an
// error.
func helm(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	out, err := run(ctx, e.helm, append([]string{"--kube-context", "kind-" + e.cluster, "-n", heraldNS}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Real kube-proxy beside herald, in the same cluster, in each of its modes: kubeadm's
// kube-proxy addon is installed under a running herald; every speaker's proxier must
// turn itself off (kube-proxy's canary chain in iptables mode, its nftables table in
// nftables mode), the VIPs keep working, and a Service created afterwards works too:
// only kube-proxy can have written its rules (a KUBE-EXT chain, an element of the
// service-ips map). Then kube-proxy is removed again (DaemonSet deleted, `kube-proxy
// --cleanup` on every node) and, once the speakers restart, herald's proxier serves
// everything again, the API server's ClusterIP for pods included.
func TestKubeProxy(t *testing.T) {
	for _, m := range []kubeProxyMode{
		{
			name: "iptables", svc: "svc4",
			running: []string{"iptables", "-t", "mangle", "-S", "KUBE-PROXY-CANARY"},
			rules: func(svc, _ string) string {
				return `iptables-save -t nat | grep -e 'default/` + svc + `:` + svc + `-webport loadbalancer IP' -e '^:KUBE-EXT-'`
			},
			programmed: func(rules, ip string) bool {
				return strings.Contains(rules, "-j KUBE-EXT-") && strings.Contains(rules, ip+"/32")
			},
		},
		{
			name: "nftables", svc: "svc5",
			running: []string{"nft", "list", "table", "ip", "kube-proxy"},
			rules: func(_, ip string) string {
				return `nft list map ip kube-proxy service-ips | grep -F '` + ip + ` '`
			},
			programmed: func(rules, ip string) bool {
				return strings.Contains(rules, ip+" . tcp . 80 : goto external-")
			},
		},
	} {
		t.Run(m.name, func(t *testing.T) { kubeProxyBeside(t, m) })
	}
}

// kubeProxyMode is what differs between kube-proxy's modes for TestKubeProxy.
type kubeProxyMode struct {
	name string // KubeProxyConfiguration's mode
	svc  string // the Service created once kube-proxy runs
	// running is a command, run on a node, that succeeds once kube-proxy programs it.
	running []string
	// rules is a shell command, run on a node, that prints kube-proxy's rules for
	// the Service's LoadBalancer IP; programmed says whether they send it on.
	rules      func(svc, ip string) string
	programmed func(rules, ip string) bool
}

func kubeProxyBeside(t *testing.T, m kubeProxyMode) {
	ensureKustomize(t)
	checkServed(t, 10)
	cp := e.cluster + "-control-plane"
	start := time.Now()
	// kind's kubeadm config with the KubeProxyConfiguration a kubeProxyMode: iptables
	// (or nftables) cluster gets; kind skipped this phase at creation (kubeProxyMode:
	// none). As kind does, conntrack.maxPerCore 0: a node container may not set
	// nf_conntrack_max, and kube-proxy exits when it cannot.
	docker(t, "exec", cp, "sh", "-c", `set -e
cp /kind/kubeadm.conf /tmp/kube-proxy.conf
cat >>/tmp/kube-proxy.conf <<EOF
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: `+m.name+`
clusterCIDR: 10.10.0.0/16
iptables: {minSyncPeriod: 1s}
nftables: {minSyncPeriod: 1s}
conntrack: {maxPerCore: 0}
EOF
kubeadm init phase addon kube-proxy --config /tmp/kube-proxy.conf`)
	removed := false
	remove := func() {
		if !removed {
			removed = true
			removeKubeProxy(t)
		}
	}
	defer remove()
	k(t, "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout=3m")
	// The rollout says little (kube-proxy has no readiness probe): kube-proxy runs once
	// it has programmed every node.
	nodes := strings.Fields(k(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
	waitUntil(t, 2*time.Minute, "kube-proxy ("+m.name+") programming every node", func() (bool, string) {
		for _, n := range nodes {
			if out, err := run(t.Context(), "docker", append([]string{"exec", n}, m.running...)...); err != nil {
				logs, _ := kubectl(t.Context(), "-n", "kube-system", "logs", "-l", "k8s-app=kube-proxy", "--tail=3")
				return false, fmt.Sprintf("not yet on %s (%v %s); kube-proxy's logs end: %s", n, err, out, logs)
			}
		}
		return true, ""
	})
	t.Logf("kube-proxy (%s) running on every node %.0fs after kubeadm's addon phase", m.name, time.Since(start).Seconds())

	off := waitUntil(t, 2*time.Minute, "every speaker's proxier turned off by kube-proxy", func() (bool, string) {
		var on []string
		for _, pod := range strings.Fields(k(t, "-n", heraldNS, "get", "pod", "-l", "app.kubernetes.io/component=speaker", "-o", "name")) {
			logs := k(t, "-n", heraldNS, "logs", pod)
			if !strings.Contains(logs, "service proxy disabled") || !strings.Contains(logs, "kube-proxy") {
				on = append(on, pod)
			}
		}
		return len(on) == 0, fmt.Sprintf("no 'service proxy disabled' for kube-proxy in the logs of %v", on)
	})
	t.Logf("FIGURE kube-proxy-%s-detected: every speaker's proxier off %.0fs after kube-proxy ran (its check runs every 30s)", m.name, off.Seconds())
	checkServed(t, 20)

	// A Service the speakers' proxiers never saw while on.
	svc1, err := os.ReadFile(filepath.Join(e.root, "hack", "demo", "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.SplitN(strings.ReplaceAll(string(svc1), "svc1", m.svc), "\n---\n", 2)[0]
	kApply(t, manifest)
	defer k(t, "delete", "service", m.svc, "--ignore-not-found")
	var ip string
	waitUntil(t, time.Minute, "an IP for "+m.svc, func() (bool, string) {
		ip = serviceIP(t, m.svc)
		return ip != "", "none yet"
	})
	owner := ""
	waitUntil(t, time.Minute, "one node answering ARP for "+m.svc+"'s "+ip, func() (bool, string) {
		macs := arpMACs(t, ip, 3)
		if len(macs) == 1 {
			for mac := range macs {
				owner = nodeMACs(t)[mac]
			}
		}
		return len(macs) == 1, describeMACs(macs, nodeMACs(t))
	})
	// herald answers ARP as soon as it has elected the owner; kube-proxy programs the
	// Service on its own schedule (minSyncPeriod 1 s): wait for its rule, then curl.
	var rules string
	waitUntil(t, time.Minute, "kube-proxy ("+m.name+") programming "+m.svc+"'s "+ip+" on "+owner, func() (bool, string) {
		out, _ := run(t.Context(), "docker", "exec", owner, "sh", "-c", m.rules(m.svc, ip))
		rules = out
		return m.programmed(rules, ip), rules
	})
	got := curls(t, ip, 20)
	if got["webpod1"]+got["webpod2"] != 20 {
		t.Errorf("%s (%s) behind kube-proxy (%s): 20 curls answered %v", m.svc, ip, m.name, got)
	}
	t.Logf("%s %s behind kube-proxy (%s): %v; on %s:\n%s", m.svc, ip, m.name, got, owner, grepLines(rules, ip))

	remove()
	checkServed(t, 20)
	out := podRun(t, "after-kube-proxy-"+m.name, `dig +short +time=2 +tries=3 kubernetes.default.svc.cluster.local && curl -sk --max-time 5 -o /dev/null -w '%{http_code}\n' https://kubernetes.default.svc/readyz`)
	if f := strings.Fields(out); len(f) != 2 || f[1] != "200" {
		t.Errorf("from a pod once herald's proxier is back: %q, want the kubernetes ClusterIP and 200", out)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// removeKubeProxy undoes kubeadm's kube-proxy addon: its objects, then its rules on
// every node (`kube-proxy --cleanup`, from the node's preloaded image), then restarts
// herald's speakers, whose proxiers turned off for good when kube-proxy came.
func removeKubeProxy(t testing.TB) {
	t.Helper()
	start := time.Now()
	k(t, "-n", "kube-system", "delete", "daemonset/kube-proxy", "configmap/kube-proxy", "serviceaccount/kube-proxy",
		"role/kube-proxy", "rolebinding/kube-proxy", "--ignore-not-found", "--wait")
	k(t, "delete", "clusterrolebinding", "kubeadm:node-proxier", "--ignore-not-found")
	waitUntil(t, 2*time.Minute, "kube-proxy pods gone", func() (bool, string) {
		pods := k(t, "-n", "kube-system", "get", "pod", "-l", "k8s-app=kube-proxy", "-o", "name")
		return pods == "", pods
	})
	nodes := strings.Fields(k(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
	for _, n := range nodes {
		docker(t, "exec", n, "ctr", "-n", "k8s.io", "run", "--rm", "--net-host", "--privileged",
			"registry.k8s.io/kube-proxy:v1.36.3", "kube-proxy-cleanup", "kube-proxy", "--cleanup")
	}
	k(t, "-n", heraldNS, "rollout", "restart", "daemonset/herald-speaker")
	k(t, "-n", heraldNS, "rollout", "status", "daemonset/herald-speaker", "--timeout=5m")
	for _, svc := range walkthrough {
		ip := serviceIP(t, svc)
		waitUntil(t, time.Minute, "one owner of "+ip+" after the speakers restarted", func() (bool, string) {
			macs := arpMACs(t, ip, 3)
			return len(macs) == 1, describeMACs(macs, nodeMACs(t))
		})
	}
	t.Logf("kube-proxy removed and herald's speakers restarted in %.0fs", time.Since(start).Seconds())
}

// nodeEventsSince lists the Events (events.k8s.io) of the given reasons about node
// that happened at t0 or later, as "+<seconds> <reason> by <reporter>".
func nodeEventsSince(t testing.TB, node string, t0 time.Time, reasons ...string) []string {
	t.Helper()
	var list struct {
		Items []struct {
			Regarding struct {
				Kind, Name string
			} `json:"regarding"`
			Reason            string    `json:"reason"`
			EventTime         time.Time `json:"eventTime"`
			ReportingInstance string    `json:"reportingInstance"`
			Series            *struct {
				Count            int       `json:"count"`
				LastObservedTime time.Time `json:"lastObservedTime"`
			} `json:"series"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(k(t, "get", "events.events.k8s.io", "-A", "-o", "json")), &list); err != nil {
		t.Fatalf("kubectl get events: %v", err)
	}
	type event struct {
		at   time.Duration
		text string
	}
	var evs []event
	for _, ev := range list.Items {
		if ev.Regarding.Kind != "Node" || ev.Regarding.Name != node || !slices.Contains(reasons, ev.Reason) {
			continue
		}
		at := ev.EventTime
		if ev.Series != nil {
			at = ev.Series.LastObservedTime // an earlier one may be before t0
		}
		if at.Before(t0.Add(-time.Second)) {
			continue
		}
		evs = append(evs, event{at.Sub(t0), fmt.Sprintf("+%.2fs %s by %s", at.Sub(t0).Seconds(), ev.Reason, ev.ReportingInstance)})
	}
	slices.SortFunc(evs, func(a, b event) int { return int(a.at - b.at) })
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev.text)
	}
	return out
}
