package agent

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStatusChangedIgnoresHeartbeatsOnly checks what makes the agent post a node's
// status before NodeStatusReportFrequency: not a heartbeat alone, but a Ready condition
// someone else changed (the node lifecycle controller's Unknown).
func TestStatusChangedIgnoresHeartbeatsOnly(t *testing.T) {
	a := &Agent{cfg: Config{Node: "worker", NodeIP: netip.MustParseAddr("172.18.0.3")}}
	var posted corev1.NodeStatus
	a.nodeStatus(&posted)

	later := posted.DeepCopy()
	time.Sleep(1100 * time.Millisecond) // metav1.Time keeps seconds
	a.nodeStatus(later)
	if later.Conditions[0].LastHeartbeatTime.Equal(&posted.Conditions[0].LastHeartbeatTime) {
		t.Fatal("a new status kept the old heartbeat")
	}
	if statusChanged(&posted, later) {
		t.Error("a status differing only in its heartbeats counts as changed: the agent would post every 10 s")
	}

	// What the node lifecycle controller writes after 50 s without a Lease renewal.
	lost := posted.DeepCopy()
	for i := range lost.Conditions {
		lost.Conditions[i].Status = corev1.ConditionUnknown
		lost.Conditions[i].Reason = "NodeStatusUnknown"
		lost.Conditions[i].LastTransitionTime = metav1.Now()
	}
	back := lost.DeepCopy()
	a.nodeStatus(back)
	if !statusChanged(lost, back) {
		t.Error("Ready=Unknown in the API and Ready=True computed count as unchanged: the node would stay NotReady")
	}
	if readyStatus(back) != corev1.ConditionTrue || readyStatus(lost) != corev1.ConditionUnknown {
		t.Errorf("Ready of the status posted %q, of the one found %q", readyStatus(back), readyStatus(lost))
	}
	if !back.Conditions[0].LastTransitionTime.After(posted.Conditions[0].LastTransitionTime.Time) {
		t.Error("Ready's transition time did not move when it went from Unknown to True")
	}
}

// TestPodMarkedNotReadyIsReportedAgain checks that a pod the node lifecycle controller
// marked not ready (MarkPodsNotReady sets the Ready condition False, nothing else)
// counts as unreported, and that the status the agent writes then is Ready again.
func TestPodMarkedNotReadyIsReportedAgain(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "webpod1", UID: "u1"},
		Spec:       corev1.PodSpec{NodeName: "worker", Containers: []corev1.Container{{Name: "c", Image: "traefik/whoami"}}},
	}
	rec := PodRecord{UID: "u1", IP: netip.MustParseAddr("10.244.1.2")}
	runningStatus(pod, rec, []string{"172.18.0.3"}, metav1.Now())
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			pod.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if reported(pod, rec) {
		t.Fatal("a pod marked not ready counts as reported: the agent would leave it not ready")
	}
	runningStatus(pod, rec, []string{"172.18.0.3"}, metav1.Now())
	if !reported(pod, rec) || podReadyStatus(pod) != corev1.ConditionTrue {
		t.Errorf("after reporting again: Ready %q, conditions %v", podReadyStatus(pod), pod.Status.Conditions)
	}
}
