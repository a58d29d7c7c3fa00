package speaker

import (
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testenv"
)

// A node that dies, comes back and dies again, three times in a few seconds, then
// comes back: each withholding and each restoring is an Event of its own at the API
// server, newest last, so that `herald status` (the newest EndpointsWithheld against the newest
// EndpointsRestored) sees the third death. Through client-go's recorder the third
// EndpointsWithheld would be folded into a series and not sent for 30 minutes.
func TestNodeEventsEachWithholdingIsAnEvent(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker"}}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	w := newNodeEvents(env.Client, env.Client, "worker2", logr.Discard())
	var want []string
	for i := range 3 {
		if i > 0 {
			if err := w.create(ctx, w.event(node, corev1.EventTypeNormal, heraldv1.ReasonEndpointsRestored, "Restore", "back")); err != nil {
				t.Fatal(err)
			}
			want = append(want, heraldv1.ReasonEndpointsRestored)
		}
		if err := w.create(ctx, w.event(node, corev1.EventTypeWarning, heraldv1.ReasonEndpointsWithheld, "WithholdVanished", "lost")); err != nil {
			t.Fatal(err)
		}
		want = append(want, heraldv1.ReasonEndpointsWithheld)
		time.Sleep(time.Millisecond)
	}

	// The loop's way: in the background.
	w.send(ctx, node, corev1.EventTypeNormal, heraldv1.ReasonEndpointsRestored, "Restore", "back")
	want = append(want, heraldv1.ReasonEndpointsRestored)

	var got []corev1.Event
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var evs corev1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == "worker" {
				got = append(got, e)
			}
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	slices.SortFunc(got, func(a, b corev1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	var reasons []string
	for _, e := range got {
		reasons = append(reasons, e.Reason)
		if e.ReportingInstance != "herald-speaker-worker2" || e.ReportingController != "herald-speaker" {
			t.Errorf("Event %s reported by %q of %q, want herald-speaker-worker2 of herald-speaker", e.Name, e.ReportingInstance, e.ReportingController)
		}
		if e.InvolvedObject.UID != node.UID {
			t.Errorf("Event %s regards UID %q, want the Node's %q", e.Name, e.InvolvedObject.UID, node.UID)
		}
	}
	if !slices.Equal(reasons, want) {
		t.Fatalf("Events on the Node, oldest first: %q; want %q", reasons, want)
	}
}
