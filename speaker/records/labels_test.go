package records

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/speaker/quorum"
)

// Every node name gives a valid, distinct label; a name that is not a label name is
// hashed. Rewriting a record drops the misses labels no longer wanted and the older
// format's labels.
func TestMissesLabel(t *testing.T) {
	long := strings.Repeat("a", 64)
	names := []string{"kind-worker", "node-0042", "ip-10-0-0-1.ec2.internal", long, long + "b"}
	seen := map[string]string{}
	for _, n := range names {
		l := MissesLabel(n)
		if errs := validation.IsQualifiedName(l); len(errs) > 0 {
			t.Errorf("MissesLabel(%q) = %q: %v", n, l, errs)
		}
		if o, ok := seen[l]; ok {
			t.Errorf("%q and %q share the label %q", o, n, l)
		}
		seen[l] = n
	}
	if got := MissesLabel("kind-worker"); got != "misses.herald.dev/kind-worker" {
		t.Errorf("MissesLabel(kind-worker) = %q, want the name itself", got)
	}
	older := map[string]string{MissesLabel("back"): "", hearsLabelPrefix + "a": "", olderModeLabel: "Quorum", "other": "x"}
	labels := setLabels(older, recordLabels([]string{"gone"}, quorum.ModeHold))
	for _, k := range []string{MissesLabel("back"), hearsLabelPrefix + "a", olderModeLabel} {
		if _, ok := labels[k]; ok {
			t.Errorf("setLabels kept %s: %v", k, labels)
		}
	}
	if labels["other"] != "x" || labels[ModeLabel] != "Hold" || labels[Label] != "true" {
		t.Errorf("setLabels: %v", labels)
	}
	if _, ok := labels[MissesLabel("gone")]; !ok {
		t.Errorf("setLabels: no label for the speaker missed: %v", labels)
	}
	if len(labels) != 4 {
		t.Errorf("setLabels: %v, want the record, mode, one misses label and other", labels)
	}
}

// missed: the speakers known and not heard, itself aside, sorted and unique.
func TestMissed(t *testing.T) {
	for _, c := range []struct {
		known, heard, want []string
	}{
		{known: []string{"a", "b", "c"}, heard: []string{"a", "b", "c"}, want: []string{}},
		{known: []string{"c", "b", "a", "c", "d"}, heard: []string{"a", "b"}, want: []string{"c", "d"}},
		{known: []string{"a", "b"}, heard: []string{"b"}, want: []string{}}, // a is self
		{known: nil, heard: []string{"a"}, want: []string{}},
	} {
		if got := missed("a", c.known, c.heard); !slices.Equal(got, c.want) {
			t.Errorf("missed(a, %v, %v) = %v, want %v", c.known, c.heard, got, c.want)
		}
	}
}

// Misses, at a real API server: the speakers expected or whose record was seen,
// not heard, less the writers seen whose Node is gone (an expected one stays).
func TestRecordMisses(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	for _, n := range []string{"a", "b", "c"} {
		if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	r := newKeeper("a", "herald-system", DefaultConfig(), env.Client, env.Client, env.Client, func() {}, func(string, []string) {}, logr.Discard())
	for i, n := range []string{"b", "c", "gone", "d"} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: Name(n), ResourceVersion: fmt.Sprint(i + 1)}}
		r.note(l, true)
	}
	if got, want := r.Misses([]string{"a", "b", "e"}, []string{"a", "b"}), []string{"c", "e"}; !slices.Equal(got, want) {
		t.Errorf("Misses = %v, want %v (c: seen, its Node exists; e: expected; gone and d: seen, no Node)", got, want)
	}
	if got := r.Misses([]string{"a", "b", "c"}, []string{"a", "b", "c"}); len(got) != 0 {
		t.Errorf("hearing every speaker whose Node exists: Misses = %v, want none", got)
	}
	// f was heard, its record never seen (the event of its first record lost): once
	// unheard and no longer expected, it is still missed while its Node exists.
	if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "f"}}); err != nil {
		t.Fatal(err)
	}
	if got := r.Misses([]string{"a", "b", "c", "f", "h"}, []string{"a", "b", "c", "f", "h"}); len(got) != 0 {
		t.Errorf("hearing f and h: Misses = %v, want none", got)
	}
	if got, want := r.Misses([]string{"a", "b", "c"}, []string{"a", "b", "c"}), []string{"f"}; !slices.Equal(got, want) {
		t.Errorf("f and h heard once, no longer: Misses = %v, want %v (h has no Node)", got, want)
	}
	if err := env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "f"}}); err != nil {
		t.Fatal(err)
	}
	if got := r.Misses([]string{"a", "b", "c"}, []string{"a", "b", "c"}); len(got) != 0 {
		t.Errorf("f's Node deleted: Misses = %v, want none", got)
	}
	if got := r.known(nil, nil); slices.Contains(got, "f") || slices.Contains(got, "h") {
		t.Errorf("known = %v: f and h, heard once, whose Nodes are gone, are still known", got)
	}
}
