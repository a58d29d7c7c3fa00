package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// imageID stands where a container runtime would put the image digest: no image runs.
const imageID = "lab://whoami"

// reported says whether the Pod's status already says what rec says: Running, Ready,
// at rec's address. Writing only then keeps the agent's own updates from looping.
func reported(pod *corev1.Pod, rec PodRecord) bool {
	st := pod.Status
	return st.Phase == corev1.PodRunning && st.PodIP == rec.IP.String() && len(st.PodIPs) == len(rec.ips()) &&
		conditionTrue(st.Conditions, corev1.PodReady) &&
		len(st.ContainerStatuses) == len(pod.Spec.Containers)
}

func conditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// reportRunning writes the status a kubelet writes once every container runs and is
// ready; the EndpointSlice controller reads podIPs, the Ready condition and nodeName.
func (a *Agent) reportRunning(ctx context.Context, pod *corev1.Pod, rec PodRecord) error {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	pods := a.cs.CoreV1().Pods(pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(cur.UID) != rec.UID {
			return nil // replaced meanwhile; its own sync follows
		}
		runningStatus(cur, rec, a.cfg.nodeIPs(), metav1.Now())
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

// runningStatus fills in pod's status as Running and Ready at rec's addresses (IPv4
// first, as a kubelet lists them) on a node with hostIPs, keeping what the API server
// set (QoS class) and the times already reported.
func runningStatus(pod *corev1.Pod, rec PodRecord, hostIPs []string, now metav1.Time) {
	st := &pod.Status
	started := now
	if st.StartTime != nil {
		started = *st.StartTime
	}
	st.Phase = corev1.PodRunning
	st.HostIP, st.HostIPs = hostIPs[0], nil
	for _, ip := range hostIPs {
		st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: ip})
	}
	st.PodIP, st.PodIPs = rec.IP.String(), nil
	for _, ip := range rec.ips() {
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip.String()})
	}
	st.StartTime = &started
	st.Reason, st.Message = "", ""
	var conds []corev1.PodCondition
	for _, t := range []corev1.PodConditionType{
		corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodScheduled,
		corev1.ContainersReady, corev1.PodReady,
	} {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
		for _, old := range st.Conditions {
			if old.Type == t && old.Status == corev1.ConditionTrue {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		conds = append(conds, c)
	}
	st.Conditions = conds
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     imageID,
			ContainerID: "lab://" + shortHash(rec.UID+"/"+c.Name, 16),
			Ready:       true,
			Started:     ptr.To(true),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		})
	}
}

// podStatusRecheck is how often the agent compares its pods' statuses in the API server
// with what it runs, as the kubelet's status manager reconciles every 10 s.
const podStatusRecheck = 10 * time.Second

// recheckKey is queued every podStatusRecheck; no Pod's key looks like it.
const recheckKey = "/recheck"

// recheckStatuses reads the node's Pods from the API server, not the informer's cache,
// and reports again each pod the agent runs whose status no longer says Running and
// Ready: the node lifecycle controller marks every pod of a node it lost not ready, and
// when the node comes back its watch may be a while re-established (the connection died
// with the cable, and client-go backs off), while a kubelet fixes them within seconds.
// A failure (the API server still out of reach) waits for the next tick.
func (a *Agent) recheckStatuses(ctx context.Context) {
	if len(a.pods) == 0 {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, podStatusRecheck)
	defer cancel()
	list, err := a.cs.CoreV1().Pods("").List(lctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", a.cfg.Node).String(),
	})
	if err == nil {
		for i := range list.Items {
			pod := &list.Items[i]
			p := a.pods[pod.Namespace+"/"+pod.Name]
			if p == nil || p.rec.UID != string(pod.UID) || pod.DeletionTimestamp != nil || reported(pod, p.rec) {
				continue // not the agent's to report, or reported already
			}
			a.log.Printf("pod %s/%s: reported %s, Ready %s: reporting it Running and Ready again",
				pod.Namespace, pod.Name, pod.Status.Phase, podReadyStatus(pod))
			if err = a.reportRunning(ctx, pod, p.rec); err != nil {
				break
			}
		}
	}
	switch {
	case err != nil && !a.rechecking:
		a.log.Printf("rechecking pod statuses: %v (retrying every %v)", err, podStatusRecheck)
	case err == nil && a.rechecking:
		a.log.Printf("pod statuses rechecked again")
	}
	a.rechecking = err != nil
}

// podReadyStatus is the status of the pod's Ready condition, "" when it has none.
func podReadyStatus(pod *corev1.Pod) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}
