package speaker

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeEvents writes the Events that say a node's endpoints are withheld or restored,
// each as a new Event. client-go's recorder folds the third and later Events of one
// reason and action on an object into a series that it sends only every 30 minutes;
// `herald status` tells withheld nodes from the newest of these Events, so through the
// recorder a node that died a third time within minutes showed as alive.
type nodeEvents struct {
	c client.Writer
	// instance is the writer's ReportingInstance: herald-speaker-<node>, which speaker
	// wrote it (the recorder's is the host name, the same for every speaker of a lab).
	instance string
	now      func() time.Time
}

// reportingController is the ReportingController of the speakers' Events.
const reportingController = "herald-speaker"

func newNodeEvents(c client.Writer, self string) nodeEvents {
	return nodeEvents{c: c, instance: reportingController + "-" + self, now: time.Now}
}

// write creates an Event on n.
func (w nodeEvents) write(ctx context.Context, n *corev1.Node, typ, reason, action, note string) error {
	now := w.now()
	ev := &eventsv1.Event{
		// Events on cluster-scoped objects live in the default namespace.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", n.Name, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: reportingController,
		ReportingInstance:   w.instance,
		Action:              action,
		Reason:              reason,
		Type:                typ,
		Note:                note,
		Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID},
	}
	if err := w.c.Create(ctx, ev); err != nil {
		return fmt.Errorf("event %s on Node %s: %w", reason, n.Name, err)
	}
	return nil
}
