package app

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

func nodeEvent(node, reason, reporter string, at time.Time, v1 bool) corev1.Event {
	e := corev1.Event{
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node},
		Reason:         reason, Message: reason + " " + node,
	}
	if v1 { // written through events.k8s.io: eventTime and the reporting instance
		e.EventTime, e.ReportingInstance = metav1.NewMicroTime(at), reporter
	} else {
		e.FirstTimestamp, e.LastTimestamp, e.Source.Host = metav1.NewTime(at.Add(-time.Minute)), metav1.NewTime(at), reporter
	}
	return e
}

func TestWithheldNodes(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	events := []corev1.Event{
		// worker: withheld, restored, withheld again: withheld.
		nodeEvent("worker", heraldv1.ReasonEndpointsWithheld, "worker2", t0, true),
		nodeEvent("worker", heraldv1.ReasonEndpointsRestored, "worker2", t0.Add(time.Minute), true),
		nodeEvent("worker", heraldv1.ReasonEndpointsWithheld, "worker3", t0.Add(2*time.Minute), true),
		// worker2: withheld, then restored (a core/v1 writer's timestamps): not withheld.
		nodeEvent("worker2", heraldv1.ReasonEndpointsWithheld, "worker", t0, false),
		nodeEvent("worker2", heraldv1.ReasonEndpointsRestored, "worker", t0.Add(time.Second), false),
		// worker4: withheld, repeated in a series.
		nodeEvent("worker4", heraldv1.ReasonEndpointsWithheld, "worker", t0, true),
		// Other reasons and objects do not count.
		nodeEvent("worker5", "NodeNotReady", "kcm", t0, false),
		{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "worker6"}, Reason: heraldv1.ReasonEndpointsWithheld, EventTime: metav1.NewMicroTime(t0)},
	}
	events[5].Series = &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(t0.Add(time.Hour))}
	got := WithheldNodes(events)
	want := []WithheldNode{
		{Node: "worker", Since: "2026-11-25T12:02:00Z", ReportedBy: "worker3", Message: "EndpointsWithheld worker"},
		{Node: "worker4", Since: "2026-11-25T13:00:00Z", ReportedBy: "worker", Message: "EndpointsWithheld worker4"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WithheldNodes =\n%+v\nwant\n%+v", got, want)
	}

	var b bytes.Buffer
	printWithheld(&b, got[:1], t0.Add(5*time.Minute))
	if s := b.String(); !strings.Contains(s, "node worker is dead to the speakers (for 3m, reported by worker3)") {
		t.Errorf("printed %q", s)
	}
}
