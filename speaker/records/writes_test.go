package records

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/speaker/quorum"
)

func TestWriteReason(t *testing.T) {
	base := Wish{Members: []string{"a", "b"}, Unreachable: []string{"c"}, MACs: []string{"m1"}, Mode: quorum.ModeQuorum, Askers: []string{"c"}}
	with := func(f func(*Wish)) Wish {
		w := base
		f(&w)
		return w
	}
	for _, tc := range []struct {
		name    string
		written *Wish
		wish    Wish
		want    string
	}{
		{"nothing written", nil, base, writeStart},
		{"mode and view", &base, with(func(w *Wish) { w.Mode = quorum.ModeHold; w.Members = []string{"a"} }), writeMode},
		{"members", &base, with(func(w *Wish) { w.Members = []string{"a"} }), writeView},
		{"unreachable", &base, with(func(w *Wish) { w.Unreachable = nil }), writeView},
		{"macs", &base, with(func(w *Wish) { w.MACs = []string{"m2"} }), writeMACs},
		{"new asker", &base, with(func(w *Wish) { w.Askers = []string{"c", "d"} }), writeAnswer},
	} {
		if got := writeReason(tc.written, tc.wish); got != tc.want {
			t.Errorf("%s: writeReason = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Against a real API server: within the coalescing window after a write, a change of
// view and a new asker are held back, a change of mode is written at once with them,
// and a change held back is written when the window ends.
func TestRecordsCoalesce(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	const ns = "herald-system"
	env.CreateNamespace(t, ns)
	w := &countingWriter{Writer: env.Client, writes: map[string]int{}}
	start := func(node string, coalesce time.Duration) *Keeper {
		cfg := Config{Renew: time.Hour, FastRenew: 200 * time.Millisecond, Duration: 3 * time.Hour, Coalesce: coalesce}
		r := newKeeper(node, ns, cfg, env.Client, env.Client, w, func() {}, func(string, []string) {}, logr.Discard())
		r.Want(Wish{Members: []string{node, "b", "c"}, Mode: quorum.ModeQuorum})
		go r.Run(ctx)
		return r
	}
	stored := func(node string) (members string, mode string) {
		var l coordinationv1.Lease
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: Name(node)}, &l); err != nil {
			return "", ""
		}
		return l.Annotations[MembersAnnotation], l.Annotations[ModeAnnotation]
	}
	count := func(r *Keeper, reason string) float64 {
		n, err := r.writeCount(reason)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A window far longer than the test: what it holds back is never written alone.
	a := start("a", time.Hour)
	eventually(t, "a's first record stored", func() bool { m, _ := stored("a"); return m == "a,b,c" })
	a.Want(Wish{Members: []string{"a", "b"}, Unreachable: []string{"c"}, Mode: quorum.ModeQuorum})
	a.Want(Wish{Members: []string{"a", "b"}, Unreachable: []string{"c"}, Mode: quorum.ModeQuorum, Askers: []string{"c"}})
	time.Sleep(time.Second) // ample for a write at once (each takes milliseconds here)
	if m, _ := stored("a"); m != "a,b,c" {
		t.Fatalf("a change of view within the window was written at once: members %q, want a,b,c until the window ends", m)
	}
	a.Want(Wish{Members: []string{"a"}, Unreachable: []string{"b", "c"}, Mode: quorum.ModeHold, Askers: []string{"c"}})
	eventually(t, "a's change of mode written at once", func() bool { m, mode := stored("a"); return m == "a" && mode == string(quorum.ModeHold) })
	if got := w.of(Name("a")); got != 2 {
		t.Errorf("a's record written %d times, want 2 (its first write, and the change of mode with the view held back)", got)
	}
	// The count follows the stored write by a moment.
	eventually(t, "a's change of mode counted", func() bool { return count(a, writeMode) == 1 })
	if s, v, md, an := count(a, writeStart), count(a, writeView), count(a, writeMode), count(a, writeAnswer); s != 1 || v != 0 || md != 1 || an != 0 {
		t.Errorf("a's writes by reason: start %v, view %v, mode %v, answer %v; want 1, 0, 1, 0", s, v, md, an)
	}

	// A short window: the change held back is written when it ends.
	d := start("d", 300*time.Millisecond)
	eventually(t, "d's first record stored", func() bool { m, _ := stored("d"); return m == "b,c,d" || m == "d,b,c" })
	d.Want(Wish{Members: []string{"d", "b"}, Mode: quorum.ModeQuorum})
	d.Want(Wish{Members: []string{"d"}, Mode: quorum.ModeQuorum})
	eventually(t, "d's change of view written when the window ends", func() bool { m, _ := stored("d"); return m == "d" })
	if got := w.of(Name("d")); got != 2 {
		t.Errorf("d's record written %d times, want 2 (its first write, and both changes of view in one)", got)
	}
	eventually(t, "d's change of view counted", func() bool { return count(d, writeView) >= 1 })
	if v := count(d, writeView); v != 1 {
		t.Errorf("d's writes of a change of view: %v, want 1", v)
	}
}

// writeCount reads the count of this speaker's record writes for reason
// (herald_speaker_record_writes_total), for tests and benchmarks.
func (r *Keeper) writeCount(reason string) (float64, error) {
	n, err := counterValue(r.writes, reason)
	if err != nil {
		return 0, fmt.Errorf("reading %s's record writes: %w", r.self, err)
	}
	return n, nil
}

// counterValue reads c's count for label.
func counterValue(c *prometheus.CounterVec, label string) (float64, error) {
	var m dto.Metric
	if err := c.WithLabelValues(label).Write(&m); err != nil {
		return 0, err
	}
	return m.GetCounter().GetValue(), nil
}
