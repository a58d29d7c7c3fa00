package speaker

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeEvents writes the Events that say a node's endpoints are withheld or restored,
// each as a new Event. client-go's recorder folds the third and later Events of one
// reason and action on an object into a series that it sends only every 30 minutes;
// `herald status` tells withheld nodes from the newest of these Events, so through the
// recorder a node that died a third time within minutes showed as alive.
type nodeEvents struct {
	c client.Writer
	// nodes reads the Node an Event is about.
	nodes client.Reader
	// instance is the writer's ReportingInstance: herald-speaker-<node>, which speaker
	// wrote it (the recorder's is the host name, the same for every speaker of a lab).
	instance string
	now      func() time.Time
	log      logr.Logger
}

// reportingController is the ReportingController of the speakers' Events.
const reportingController = "herald-speaker"

// nodeEventTimeout bounds one Event's creation.
const nodeEventTimeout = 10 * time.Second

func newNodeEvents(c client.Writer, nodes client.Reader, self string, log logr.Logger) nodeEvents {
	return nodeEvents{c: c, nodes: nodes, instance: reportingController + "-" + self, now: time.Now, log: log}
}

// send writes an Event on n in the background: the election loop calls it and must
// not wait for the API server (which may be slow or down). Its time is taken now, so
// Events created out of order still read in order.
func (w nodeEvents) send(ctx context.Context, n *corev1.Node, typ, reason, action, note string) {
	ev := w.event(n, typ, reason, action, note)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nodeEventTimeout)
		defer cancel()
		if err := w.create(ctx, ev); err != nil {
			w.log.Error(err, "writing an Event on a withheld or restored node")
		}
	}()
}

// create creates ev and waits for the answer.
func (w nodeEvents) create(ctx context.Context, ev *eventsv1.Event) error {
	if err := w.c.Create(ctx, ev); err != nil {
		return fmt.Errorf("event %s on Node %s: %w", ev.Reason, ev.Regarding.Name, err)
	}
	return nil
}

// event is the Event on n, timed now.
func (w nodeEvents) event(n *corev1.Node, typ, reason, action, note string) *eventsv1.Event {
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
	return ev
}

// on writes an Event on the Node named node.
func (w nodeEvents) on(ctx context.Context, node, typ, reason, action, note string) {
	var n corev1.Node
	if err := w.nodes.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
		w.log.V(1).Info("no Node to write an Event on", "node", node, "error", err.Error())
		return
	}
	w.send(ctx, &n, typ, reason, action, note)
}
