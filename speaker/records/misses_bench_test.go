package records

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkRecordMisses times Misses, which runs on every decision of the
// speaker's quorum rule, at 1,000 speakers whose records it has seen and whom it has
// heard: in steady state (it hears all) and at an even split (it hears half, expects
// all). No speaker is unexpected, so no Node is read (the cache stays unused).
func BenchmarkRecordMisses(b *testing.B) {
	const n = 1_000
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%04d", i)
	}
	r := newKeeper(nodes[0], "herald-system", DefaultConfig(), nil, nil, nil, func() {}, func(string, []string) {}, logr.Discard())
	for i, node := range nodes {
		r.note(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: Name(node), ResourceVersion: fmt.Sprint(i + 1)}}, true)
	}
	for _, c := range []struct {
		name string
		live []string
	}{{"steady", nodes}, {"split", nodes[:n/2]}} {
		b.Run(fmt.Sprintf("speakers=%d/%s", n, c.name), func(b *testing.B) {
			b.ReportAllocs()
			want := n - len(c.live)
			for b.Loop() {
				if got := len(r.Misses(nodes, c.live)); got != want {
					b.Fatalf("Misses gave %d speakers, want %d", got, want)
				}
			}
		})
	}
}
