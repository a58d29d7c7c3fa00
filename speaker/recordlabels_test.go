package speaker

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"herald.dev/herald/speaker/quorum"
)

// Every node name gives a valid, distinct label; a name that is not a label name is
// hashed.
func TestHearsLabel(t *testing.T) {
	long := strings.Repeat("a", 64)
	names := []string{"kind-worker", "node-0042", "ip-10-0-0-1.ec2.internal", long, long + "b"}
	seen := map[string]string{}
	for _, n := range names {
		l := HearsLabel(n)
		if errs := validation.IsQualifiedName(l); len(errs) > 0 {
			t.Errorf("HearsLabel(%q) = %q: %v", n, l, errs)
		}
		if o, ok := seen[l]; ok {
			t.Errorf("%q and %q share the label %q", o, n, l)
		}
		seen[l] = n
	}
	if got := HearsLabel("kind-worker"); got != "hears.herald.dev/kind-worker" {
		t.Errorf("HearsLabel(kind-worker) = %q, want the name itself", got)
	}
	labels := setLabels(map[string]string{HearsLabel("gone"): "", "other": "x"}, recordLabels([]string{"a"}, quorum.ModeHold))
	if _, ok := labels[HearsLabel("gone")]; ok {
		t.Error("setLabels kept the label of a member no longer heard")
	}
	if labels["other"] != "x" || labels[RecordModeLabel] != "Hold" || labels[RecordLabel] != "true" {
		t.Errorf("setLabels: %v", labels)
	}
	if _, ok := labels[HearsLabel("a")]; !ok {
		t.Errorf("setLabels: no label for the member heard: %v", labels)
	}
}
