package lab

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/lab/agent"
	"herald.dev/herald/internal/testkit"
)

// lifecyclePrefix keeps this test's lab apart from every other (hl-, hlt-, he-, ...).
const lifecyclePrefix = "hnl-"

// The node lifecycle controller's defaults (node-monitor-grace-period 50 s, checked
// every 5 s) bound how soon a silent node goes NotReady; the waits below are generous
// bounds on convergence, never assertions on speed.
const (
	notReadyWait = 3 * time.Minute
	recoverWait  = 2 * time.Minute
)

// TestNodeLifecycle checks that a lab node lives and dies as a cluster's does: its agent
// renews the node's Lease as a kubelet does, and goes on doing so while only its speaker
// is dead; with its cable pulled the Node goes Ready=Unknown after the grace period (not
// at once), tainted unreachable, its pod not ready in the EndpointSlice, while the other
// node stays Ready; with the cable back the agent reports the Node and the pod Ready
// again; and a node killed as a whole (KillNode) renews nothing until StartNode.
func TestNodeLifecycle(t *testing.T) {
	l := upLifecycleLab(t)
	ctx := t.Context()
	s := l.State

	pod := createPod(t, l, "web1", "worker", 8080)
	ip := netip.MustParseAddr(pod.Status.PodIP)
	expectEndpoint(t, l, ip)
	node, err := l.Kube.CoreV1().Nodes().Get(ctx, "worker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease := getLease(t, l, "worker")
	if ptr.Deref(lease.Spec.HolderIdentity, "") != "worker" || ptr.Deref(lease.Spec.LeaseDurationSeconds, 0) != 40 ||
		len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].Kind != "Node" || lease.OwnerReferences[0].UID != node.UID {
		t.Errorf("lease %s/worker: holder %v, duration %v, owners %+v; want the kubelet's: worker, 40 s, the Node",
			corev1.NamespaceNodeLease, ptr.Deref(lease.Spec.HolderIdentity, ""), ptr.Deref(lease.Spec.LeaseDurationSeconds, 0), lease.OwnerReferences)
	}

	// A speaker's crash is not a node's death: the agent renews on.
	killed := time.Now()
	if err := s.KillSpeaker("worker"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 3*agent.LeaseDuration/4, time.Second, "the Lease renewed after the speaker was killed", func() error {
		return renewedSince(getLease(t, l, "worker"), killed)
	})
	if err := s.StartSpeaker(ctx, "worker"); err != nil {
		t.Fatal(err)
	}

	// The cable pulled: the Lease expires, the node lifecycle controller takes over.
	pulled := time.Now()
	if err := s.LinkDown(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	plugged := false
	defer func() {
		if !plugged {
			_ = s.LinkUp(ctx, "worker")
		}
	}()
	testkit.Eventually(t, notReadyWait, time.Second, "Node worker Ready=Unknown with its cable out", func() error {
		return expectNode(t, l, "worker", corev1.ConditionUnknown, true)
	})
	tookNotReady := time.Since(pulled)
	t.Logf("Node worker went Ready=Unknown %v after its cable was pulled", tookNotReady.Round(time.Second))
	// Its Lease was renewed at most 10 s before the cable went: less than 40 s after
	// it, the node would still have been given the benefit of the doubt.
	if tookNotReady < agent.LeaseDuration-leaseSlack {
		t.Errorf("Node worker went NotReady %v after its cable was pulled: before its Lease could expire", tookNotReady)
	}
	testkit.Eventually(t, recoverWait, time.Second, "pod web1 not ready in the EndpointSlice", func() error {
		return expectEndpointReady(t, l, ip, false)
	})
	if err := expectNode(t, l, "worker2", corev1.ConditionTrue, false); err != nil {
		t.Errorf("the other node, whose cable is in: %v", err)
	}

	// The cable back: the agent renews, reports the Node and its pod Ready again.
	if err := s.LinkUp(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	plugged = true
	back := time.Now()
	testkit.Eventually(t, recoverWait, time.Second, "Node worker Ready and untainted with its cable back", func() error {
		return expectNode(t, l, "worker", corev1.ConditionTrue, false)
	})
	testkit.Eventually(t, recoverWait, time.Second, "pod web1 ready again in the EndpointSlice", func() error {
		return expectEndpointReady(t, l, ip, true)
	})
	t.Logf("Node worker Ready and pod web1 ready again %v after the cable was plugged back", time.Since(back).Round(time.Second))

	// A node killed as a whole renews nothing; booted again, it is back with its pod.
	if err := s.KillNode(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	dead := time.Now()
	if p := s.Procs["worker-agent"]; !p.WaitGone(10 * time.Second) {
		t.Fatalf("the agent of worker (pid %d) survived kill-node", p.Pid)
	}
	time.Sleep(2*leaseRenewInterval + leaseSlack)
	if err := renewedSince(getLease(t, l, "worker"), dead); err == nil {
		t.Errorf("the Lease of a killed node was renewed %v after the kill", 2*leaseRenewInterval+leaseSlack)
	}
	if err := s.StartNode(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	if err := renewedSince(getLease(t, l, "worker"), dead); err != nil {
		t.Errorf("after start-node: %v", err)
	}
	testkit.Eventually(t, recoverWait, time.Second, "pod web1 ready in the EndpointSlice after start-node", func() error {
		pod, err := l.Kube.CoreV1().Pods("default").Get(ctx, "web1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Status.PodIP == "" {
			return fmt.Errorf("pod web1 has no IP")
		}
		return expectEndpointReady(t, l, netip.MustParseAddr(pod.Status.PodIP), true)
	})
	for log, lines := range s.Refusals() {
		t.Errorf("%s: refused by the API server (missing RBAC?):\n%s", log, strings.Join(lines, "\n"))
	}
}

const (
	leaseRenewInterval = agent.LeaseDuration / 4
	// leaseSlack allows for a renewal under way when a fault struck.
	leaseSlack = 5 * time.Second
)

func upLifecycleLab(t *testing.T) *Lab {
	t.Helper()
	assets := requireLab(t)
	runDir := filepath.Join(os.TempDir(), "herald-lab-test-lifecycle")
	if err := Down(runDir, lifecyclePrefix); err != nil { // an earlier run's leftovers
		t.Fatal(err)
	}
	l, err := Up(t.Context(), Config{Prefix: lifecyclePrefix, RunDir: runDir, Workers: 2, Assets: assets, Log: tlog{t}})
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
	return l
}

func getLease(t *testing.T, l *Lab, node string) *coordinationv1.Lease {
	t.Helper()
	lease, err := l.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Lease of node %s: %v", node, err)
	}
	return lease
}

func renewedSince(lease *coordinationv1.Lease, since time.Time) error {
	if r := lease.Spec.RenewTime; r == nil || !r.After(since) {
		return fmt.Errorf("lease %s last renewed at %v, not since %v", lease.Name, r, since.Format(time.RFC3339Nano))
	}
	return nil
}

// expectNode says how the Node's Ready condition and its unreachable taints differ
// from want and tainted.
func expectNode(t *testing.T, l *Lab, name string, want corev1.ConditionStatus, tainted bool) error {
	n, err := l.Kube.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var ready *corev1.NodeCondition
	for i, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = &n.Status.Conditions[i]
		}
	}
	if ready == nil || ready.Status != want {
		return fmt.Errorf("Node %s: Ready condition %+v, want %s", name, ready, want)
	}
	var effects []corev1.TaintEffect
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeUnreachable {
			effects = append(effects, taint.Effect)
		}
	}
	if has := slices.Contains(effects, corev1.TaintEffectNoExecute); has != tainted {
		return fmt.Errorf("Node %s: taints %v; want %s:NoExecute %v", name, n.Spec.Taints, corev1.TaintNodeUnreachable, tainted)
	}
	return nil
}

// expectEndpointReady says how the EndpointSlice of Service web (expectEndpoint made
// it) differs from listing ip with ready=want.
func expectEndpointReady(t *testing.T, l *Lab, ip netip.Addr, want bool) error {
	list, err := l.Kube.DiscoveryV1().EndpointSlices("default").List(t.Context(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
	if err != nil {
		return err
	}
	for _, es := range list.Items {
		for _, ep := range es.Endpoints {
			if slices.Contains(ep.Addresses, ip.String()) {
				if got := ptr.Deref(ep.Conditions.Ready, false); got != want {
					return fmt.Errorf("endpoint %s ready=%v, want %v", ip, got, want)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("no endpoint %s in the slices of Service web: %+v", ip, list.Items)
}
