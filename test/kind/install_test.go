//go:build kind

package kind

// Installing and removing herald, and the walkthrough's objects.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// installed says how herald is installed in the cluster by this run: "", "kustomize"
// or "helm". Each run starts by removing whatever an earlier run left.
var installed string

// ensureKustomize makes sure herald runs as `kubectl apply -k config/kind` installs it
// and the walkthrough's pool, webpods and Services exist, with svc1..svc3 created in
// that order on a fresh pool (so they get .200, .201, .202 as in the walkthrough).
func ensureKustomize(t testing.TB) {
	t.Helper()
	if installed == "kustomize" {
		return
	}
	uninstall(t)
	installKustomize(t)
	walkthroughObjects(t)
}

// uninstall removes herald, whichever way it was installed, and the walkthrough's
// Services, so that the next install starts from nothing (CRDs, pools and all).
func uninstall(t testing.TB) {
	t.Helper()
	start := time.Now()
	k(t, append([]string{"delete", "service", "--ignore-not-found"}, walkthrough...)...)
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	if _, err := run(ctx, e.helm, "--kube-context", "kind-"+e.cluster, "-n", heraldNS, "status", "herald"); err == nil {
		if _, err := run(ctx, e.helm, "--kube-context", "kind-"+e.cluster, "-n", heraldNS, "uninstall", "herald", "--wait"); err != nil {
			t.Fatal(err)
		}
	}
	// The controller removes a pool's finalizer herald.dev/pool-in-use once no Service
	// holds its IPs; after helm uninstall (which keeps the CRDs and the pools) no
	// controller runs, and deleting the pool would wait forever: drop the finalizer,
	// as an operator must.
	if out, _ := kubectl(ctx, "get", "deployment", "-n", heraldNS, "herald-controller", "-o", "name"); out == "" {
		// No CRD, no pools: the error is that.
		pools, _ := kubectl(ctx, "get", "ipaddresspools", "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{" "}{end}`)
		for _, pool := range strings.Fields(pools) {
			ns, name, _ := strings.Cut(pool, "/")
			k(t, "-n", ns, "patch", "ipaddresspool", name, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		}
	}
	// What the chart keeps (CRDs) and what config/kind installs: all of it.
	k(t, "delete", "--ignore-not-found", "--wait", "-k", filepath.Join(e.root, "config", "kind"))
	installed = ""
	t.Logf("herald removed in %s", time.Since(start).Round(time.Second))
}

// installKustomize installs herald as hack/kind-demo.sh does: the namespace, the
// ConfigMap herald-apiserver naming the control-plane node (there is no kube-proxy, so
// the `kubernetes` ClusterIP works only once the speakers' proxier runs), the memberlist
// Secret up front, then config/kind. It waits for both workloads and for CoreDNS,
// which reaches the API server through herald's proxier.
func installKustomize(t testing.TB) {
	t.Helper()
	start := time.Now()
	k(t, "apply", "--server-side", "-k", filepath.Join(e.root, "config", "namespace"))
	kApply(t, apiServerConfigMap(), "--server-side")
	k(t, "-n", heraldNS, "create", "secret", "generic", "herald-memberlist", "--from-literal=secretkey="+randomKey(t))
	k(t, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(e.root, "config", "kind"))
	waitRollouts(t)
	installed = "kustomize"
	t.Logf("herald installed from config/kind in %s", time.Since(start).Round(time.Second))
}

func apiServerConfigMap() string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: herald-apiserver, namespace: %s}
data: {host: %q, port: "6443"}
`, heraldNS, e.cpIP)
}

func randomKey(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	f, err := os.Open("/dev/urandom")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", b)
}

// waitRollouts waits for herald's speakers and controller, then CoreDNS.
func waitRollouts(t testing.TB) {
	t.Helper()
	to := fmt.Sprintf("--timeout=%s", waitLong)
	k(t, "-n", heraldNS, "rollout", "status", "daemonset/herald-speaker", to)
	k(t, "-n", heraldNS, "rollout", "status", "deployment/herald-controller", to)
	// Not rollout status: CoreDNS waited for a Service proxy since the cluster came up
	// and its Deployment may have passed its progress deadline long ago.
	k(t, "-n", "kube-system", "wait", "--for=condition=Available", "deployment/coredns", to)
}

// walkthroughObjects creates the pool and L2Advertisement of config/samples, the
// webpods on worker and worker2 (the whoami image), and svc1..svc3 one after another,
// each waiting for its IP.
func walkthroughObjects(t testing.TB) {
	t.Helper()
	k(t, "apply", "-k", filepath.Join(e.root, "config", "samples"))
	webpods, err := os.ReadFile(filepath.Join(e.root, "hack", "demo", "webpods.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := string(webpods)
	for _, w := range []string{"worker2", "worker"} {
		m = strings.ReplaceAll(m, "nodeName: "+w+"\n", "nodeName: "+e.cluster+"-"+w+"\n")
	}
	// A pod that stops serving the moment it is told to go fails the requests already
	// proxied to it; a well-behaved one leaves its endpoints first, as the preStop
	// sleep makes whoami do (TestDrainDockerStop evicts one). The lab's agents kill
	// pods at once whatever they say.
	m = strings.ReplaceAll(m, "    image: traefik/whoami", "    image: "+e.whoami+"\n    lifecycle: {preStop: {sleep: {seconds: 2}}}")
	m = strings.ReplaceAll(m, "terminationGracePeriodSeconds: 0", "terminationGracePeriodSeconds: 5")
	// A webpod from an earlier run may run an older image; pods' images are immutable.
	k(t, "delete", "pod", "-l", "app=webpod", "--ignore-not-found", "--wait")
	kApply(t, m)
	services, err := os.ReadFile(filepath.Join(e.root, "hack", "demo", "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(services), "\n---\n") {
		if !strings.Contains(doc, "kind: Service") {
			continue
		}
		kApply(t, doc)
		name := strings.Fields(doc[strings.Index(doc, "name: ")+len("name: "):])[0]
		waitUntil(t, time.Minute, "an IP for Service "+name, func() (bool, string) {
			ip := serviceIP(t, name)
			return ip != "", "none yet"
		})
	}
	k(t, "wait", "--for=condition=Ready", "pod", "-l", "app=webpod", "--timeout=3m")
	// Every VIP answered by one node, so that the tests start from a settled cluster.
	for _, svc := range walkthrough {
		ip := serviceIP(t, svc)
		waitUntil(t, time.Minute, "one owner of "+ip, func() (bool, string) {
			macs := arpMACs(t, ip, 3)
			return len(macs) == 1, describeMACs(macs, nodeMACs(t))
		})
	}
}

// vipsNow returns the IPs of svc1..svc3, in order.
func vipsNow(t testing.TB) []string {
	t.Helper()
	var ips []string
	for _, svc := range walkthrough {
		ips = append(ips, serviceIP(t, svc))
	}
	return ips
}

// checkServed fails unless every walkthrough VIP answers n of n curls from both
// webpods and exactly one node, a worker, answers ARP for it, the node the VIPStatus
// names. It returns the owner of each VIP.
func checkServed(t testing.TB, n int) map[string]string {
	t.Helper()
	owners := map[string]string{}
	for _, ip := range vipsNow(t) {
		got, sent := curls(t, ip, n), n
		// n curls all reach the same one of two pods by chance once in 2^(n-1) (a
		// fresh connection each, spread at random): before calling a pod unreachable,
		// ask up to three times as many again.
		for range 3 {
			if got["webpod1"]+got["webpod2"] != sent || (got["webpod1"] > 0 && got["webpod2"] > 0) {
				break
			}
			for pod, c := range curls(t, ip, n) {
				got[pod] += c
			}
			sent += n
		}
		if got["webpod1"]+got["webpod2"] != sent || got["webpod1"] == 0 || got["webpod2"] == 0 {
			t.Errorf("%s: %d curls answered %v, want all %d answered, by webpod1 and webpod2", ip, sent, got, sent)
		}
		owner := arpOwner(t, ip)
		owners[ip] = owner
		if !strings.Contains(owner, "-worker") {
			t.Errorf("%s is answered by %s, which is no worker (the control plane is excluded from load balancers)", ip, owner)
		}
		// The owner writes the VIPStatus after its takeover, through the API server.
		waitUntil(t, 30*time.Second, "the VIPStatus of "+ip+" naming "+owner, func() (bool, string) {
			st := vipStatuses(t)[ip]
			return st.Node == owner, fmt.Sprintf("it names %q (%s)", st.Node, st.Reason)
		})
		t.Logf("%s: %v, ARP answered by %s", ip, got, owner)
	}
	return owners
}

// sortedKeys is for messages.
func sortedKeys[V any](m map[string]V) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}
