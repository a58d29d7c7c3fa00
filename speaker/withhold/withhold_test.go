package withhold

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/quorum"
)

func node(name, ip string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

// A node whose speaker vanished without a goodbye is withheld, handed to the proxier,
// and reported once by the reporting speaker; back, it is restored and reported again.
// Another speaker withholds it too but writes no Event.
func TestWithholderWithholdsAndRestores(t *testing.T) {
	for _, self := range []string{"a", "c"} {
		var withheld map[string]bool
		var events []string
		w := New(Config{Self: self, Enabled: true, BindAddr: "192.0.2.1"}, Callbacks{
			SetWithheld:    func(m map[string]bool) { withheld = m },
			LeftGracefully: func(string) bool { return false },
			Event:          func(_ context.Context, node, _, reason, _, _ string) { events = append(events, reason+" "+node) },
			Changed:        func() {},
		}, logr.Discard())
		nodes := []*corev1.Node{node("a", "192.0.2.1"), node("b", "192.0.2.2"), node("c", "192.0.2.3")}
		quorate := quorum.Verdict{Mode: quorum.ModeQuorum}
		w.Update(context.Background(), Pass{Verdict: quorate, Live: []string{"a", "c"}, Lost: map[string]time.Time{"b": time.Now()}, Nodes: nodes})
		if _, ok := withheld["b"]; !ok || len(withheld) != 1 {
			t.Fatalf("%s: withheld %v, want b alone", self, withheld)
		}
		w.Update(context.Background(), Pass{Verdict: quorate, Live: []string{"a", "b", "c"}, Nodes: nodes})
		if len(withheld) != 0 {
			t.Errorf("%s: b is live again, yet withheld %v", self, withheld)
		}
		want := []string{heraldv1.ReasonEndpointsWithheld + " b", heraldv1.ReasonEndpointsRestored + " b"}
		if self != "a" {
			want = nil
		}
		if len(events) != len(want) || (len(want) > 0 && (events[0] != want[0] || events[1] != want[1])) {
			t.Errorf("%s wrote Events %v, want %v (only the live member with the smallest name reports)", self, events, want)
		}
	}
}

// A silent speaker (no Nodes read) withholds nothing.
func TestWithholderSilentWithholdsNothing(t *testing.T) {
	var withheld map[string]bool
	w := New(Config{Self: "a", Enabled: true}, Callbacks{
		SetWithheld:    func(m map[string]bool) { withheld = m },
		LeftGracefully: func(string) bool { return false },
		Event:          func(context.Context, string, string, string, string, string) {},
		Changed:        func() {},
	}, logr.Discard())
	w.Update(context.Background(), Pass{Verdict: quorum.Verdict{Mode: quorum.ModeMinority}, Live: []string{"a"}, Lost: map[string]time.Time{"b": time.Now()}})
	if len(withheld) != 0 {
		t.Errorf("a silent speaker withheld %v", withheld)
	}
}
