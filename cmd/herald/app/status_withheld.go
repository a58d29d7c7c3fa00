package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// WithheldNode is a node whose endpoints the speakers withhold from every Service:
// its speaker vanished and its host answers nothing, so they hold it dead before the
// API server does (docs/service-survival.md).
type WithheldNode struct {
	Node string `json:"node"`
	// Since is RFC 3339: the last EndpointsWithheld Event on the Node.
	Since string `json:"since"`
	// ReportedBy is the speaker that wrote that Event.
	ReportedBy string `json:"reportedBy,omitempty"`
	Message    string `json:"message,omitempty"`
}

// WithheldNodes reads, from the Events on Nodes, the nodes whose last
// EndpointsWithheld Event is newer than their last EndpointsRestored one, sorted by
// name. Events expire (an hour by default): a node withheld longer than that is long
// NotReady in the API server too.
func WithheldNodes(events []corev1.Event) []WithheldNode {
	type latest struct {
		withheld, restored time.Time
		ev                 *corev1.Event
	}
	byNode := map[string]*latest{}
	for i := range events {
		e := &events[i]
		if e.InvolvedObject.Kind != "Node" {
			continue
		}
		l := byNode[e.InvolvedObject.Name]
		if l == nil {
			l = &latest{}
			byNode[e.InvolvedObject.Name] = l
		}
		at := eventTime(e)
		switch e.Reason {
		case heraldv1.ReasonEndpointsWithheld:
			if at.After(l.withheld) {
				l.withheld, l.ev = at, e
			}
		case heraldv1.ReasonEndpointsRestored:
			if at.After(l.restored) {
				l.restored = at
			}
		}
	}
	var out []WithheldNode
	for node, l := range byNode {
		if l.ev == nil || !l.withheld.After(l.restored) {
			continue
		}
		reporter := l.ev.ReportingInstance
		if reporter == "" {
			reporter = l.ev.Source.Host
		}
		out = append(out, WithheldNode{Node: node, Since: l.withheld.UTC().Format(time.RFC3339), ReportedBy: reporter, Message: l.ev.Message})
	}
	slices.SortFunc(out, func(a, b WithheldNode) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// eventTime is when an Event last happened, whichever API wrote it: events.k8s.io
// sets eventTime and series, core/v1 writers the timestamps.
func eventTime(e *corev1.Event) time.Time {
	t := e.EventTime.Time
	for _, c := range []time.Time{e.LastTimestamp.Time, e.FirstTimestamp.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

// listWithheldNodes reads the Node Events (in the default namespace, where Events on
// cluster-scoped objects go). A user who may not read them gets no line about
// withheld endpoints; with wide, a warning says so.
func listWithheldNodes(ctx context.Context, c client.Client, host string, wide bool, errOut io.Writer) []WithheldNode {
	var evs corev1.EventList
	err := c.List(ctx, &evs, client.InNamespace(metav1.NamespaceDefault),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.kind", "Node")})
	if err != nil {
		if wide || !apierrors.IsForbidden(err) {
			fmt.Fprintf(errOut, "warning: %v; nodes whose endpoints are withheld are not shown\n", explainAPIError(err, host, "Node Events"))
		}
		return nil
	}
	return WithheldNodes(evs.Items)
}

// printWithheld says, below the table, which nodes' endpoints are withheld.
func printWithheld(w io.Writer, nodes []WithheldNode, now time.Time) {
	for _, n := range nodes {
		by := ""
		if n.ReportedBy != "" {
			by = ", reported by " + n.ReportedBy
		}
		fmt.Fprintf(w, "\nEndpoints withheld from every Service: node %s is dead to the speakers (for %s%s).\n", n.Node, age(n.Since, now), by)
	}
}
