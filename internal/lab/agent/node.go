package agent

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// KubeletVersion is what `kubectl get nodes` shows in VERSION for lab nodes: no kubelet
// runs there, and the column should not pretend otherwise.
const KubeletVersion = "lab-agent"

// register creates the Node as a kubelet registering itself would (labels, pod CIDR) or
// adopts the one that exists, and posts its status.
func (a *Agent) register(ctx context.Context) error {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Node, Labels: map[string]string{
			corev1.LabelHostname:   a.cfg.Node,
			corev1.LabelOSStable:   "linux",
			corev1.LabelArchStable: runtime.GOARCH,
		}},
		// kube-controller-manager's node IPAM is off in the lab; pod CIDRs are the lab's
		// choice, like kind's 10.244.N.0/24 (and fd00:10:244:N::/64 when dual-stack).
		Spec: corev1.NodeSpec{PodCIDR: a.cfg.PodCIDR.String(), PodCIDRs: a.cfg.podCIDRs()},
	}
	_, err := a.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		old, err := a.cs.CoreV1().Nodes().Get(ctx, a.cfg.Node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", a.cfg.Node, err)
		}
		if old.Spec.PodCIDR != "" && old.Spec.PodCIDR != a.cfg.PodCIDR.String() {
			return fmt.Errorf("node %s exists with pod CIDR %s, not %s (a pod CIDR cannot change)", a.cfg.Node, old.Spec.PodCIDR, a.cfg.PodCIDR)
		}
	case err != nil:
		return fmt.Errorf("registering node %s: %w", a.cfg.Node, err)
	}
	return a.postStatus(ctx)
}

// NodeStatusReportFrequency is how often the agent posts the node's status when nothing
// in it changed: the kubelet's default nodeStatusReportFrequency. The Lease, renewed
// every 10 s, is the heartbeat; the status is a report.
const NodeStatusReportFrequency = 5 * time.Minute

// postStatus reports the node Ready with a fresh heartbeat, now.
func (a *Agent) postStatus(ctx context.Context) error { return a.syncStatus(ctx, true) }

// syncStatus computes the node's status, as a kubelet does every
// nodeStatusUpdateFrequency, and posts it when force says so, when it differs from what
// the API server holds (heartbeat times aside: say the node lifecycle controller set
// Ready=Unknown while the node was cut off) or when NodeStatusReportFrequency has passed
// since the last post.
func (a *Agent) syncStatus(ctx context.Context, force bool) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := a.cs.CoreV1().Nodes().Get(ctx, a.cfg.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		old := n.Status.DeepCopy()
		a.nodeStatus(&n.Status)
		if !force && time.Since(a.statusPosted) < NodeStatusReportFrequency && !statusChanged(old, &n.Status) {
			return nil
		}
		if _, err = a.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		a.statusPosted = time.Now()
		if was := readyStatus(old); was != corev1.ConditionTrue && was != "" {
			a.log.Printf("node %s status posted: Ready (was %s)", a.cfg.Node, was)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("node %s status: %w", a.cfg.Node, err)
	}
	return nil
}

// statusChanged compares two node statuses as the kubelet's nodeStatusHasChanged does:
// everything but the conditions' heartbeat times.
func statusChanged(a, b *corev1.NodeStatus) bool {
	strip := func(st *corev1.NodeStatus) *corev1.NodeStatus {
		st = st.DeepCopy()
		for i := range st.Conditions {
			st.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return st
	}
	return !equality.Semantic.DeepEqual(strip(a), strip(b))
}

// readyStatus is the status of the Ready condition, "" when there is none.
func readyStatus(st *corev1.NodeStatus) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func (a *Agent) nodeStatus(st *corev1.NodeStatus) {
	now := metav1.Now()
	st.Addresses = nil
	for _, ip := range a.cfg.nodeIPs() {
		st.Addresses = append(st.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	st.Addresses = append(st.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: a.cfg.Node})
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "lab agent is posting ready status"}
	if a.shuttingDown.Load() {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "node is shutting down"}
	}
	conds := []corev1.NodeCondition{
		ready,
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
	}
	for i := range conds {
		conds[i].LastHeartbeatTime = now
		conds[i].LastTransitionTime = now
		// A transition time changes only with the status, as a kubelet keeps it.
		for _, old := range st.Conditions {
			if old.Type == conds[i].Type && old.Status == conds[i].Status {
				conds[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	st.Conditions = conds
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	st.Capacity, st.Allocatable = capacity, capacity
	st.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion:          KubeletVersion,
		OperatingSystem:         "linux",
		Architecture:            runtime.GOARCH,
		OSImage:                 "herald lab (network namespace)",
		ContainerRuntimeVersion: "lab://" + KubeletVersion,
		KernelVersion:           kernelVersion(),
	}
}

// heartbeat syncs the node's status every interval until ctx ends (syncStatus posts it
// when needed); a failure is logged and retried at the next tick (the API server may be
// unreachable while the node's link is down, as for a real kubelet).
func (a *Agent) heartbeat(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			hctx, cancel := context.WithTimeout(ctx, every)
			err := a.syncStatus(hctx, false)
			cancel()
			switch {
			case err != nil && !failing:
				a.log.Printf("node status: %v (retrying every %v)", err, every)
			case err == nil && failing:
				a.log.Printf("node status synced again")
			}
			failing = err != nil
		}
	}
}

// kernelVersion is the running kernel's release, which every namespace shares.
func kernelVersion() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// followShutdown is the agent's graceful node shutdown: SIGUSR1 begins one and SIGUSR2
// cancels it, each posting the node's status at once, as a kubelet does on systemd's
// PrepareForShutdown signal. Pods are left running: the test stops the node's
// processes itself.
func (a *Agent) followShutdown(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(sigs)
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-sigs:
			a.shuttingDown.Store(sig == unix.SIGUSR1)
			a.log.Printf("graceful node shutdown: %v (shutting down: %t)", sig, a.shuttingDown.Load())
			if err := a.postStatus(ctx); err != nil {
				a.log.Printf("posting the node's status: %v", err)
			}
		}
	}
}
