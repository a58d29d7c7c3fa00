package agent

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	corev1 "k8s.io/api/core/v1"
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

// postStatus reports the node Ready with a fresh heartbeat. Nothing in the lab marks a
// silent node NotReady (kube-controller-manager's node lifecycle controller is off), so
// the heartbeat is for people reading `kubectl get nodes` and for what may watch it.
func (a *Agent) postStatus(ctx context.Context) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := a.cs.CoreV1().Nodes().Get(ctx, a.cfg.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		a.nodeStatus(&n.Status)
		_, err = a.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s status: %w", a.cfg.Node, err)
	}
	return nil
}

func (a *Agent) nodeStatus(st *corev1.NodeStatus) {
	now := metav1.Now()
	st.Addresses = nil
	for _, ip := range a.cfg.nodeIPs() {
		st.Addresses = append(st.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	st.Addresses = append(st.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: a.cfg.Node})
	conds := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "lab agent is posting ready status"},
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

// heartbeat posts the node's status every interval until ctx ends; a failure is logged
// and retried at the next tick (the API server may be unreachable while the node's link
// is down, as for a real kubelet).
func (a *Agent) heartbeat(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			hctx, cancel := context.WithTimeout(ctx, every)
			if err := a.postStatus(hctx); err != nil {
				a.log.Printf("heartbeat: %v", err)
			}
			cancel()
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
