package election

import (
	"slices"
	"testing"
)

// electCase is one table entry: a View and Services in, the Decision per IP expected.
type electCase struct {
	name     string
	view     View
	services []Service
	want     map[string]want // by IP
}

type want struct {
	candidates []string // best first; the owner is the first, none means no owner
	reason     Reason
	message    string   // checked when set
	interfaces []string // nil: every interface
	unserved   []string
}

func runElect(t *testing.T, cases []electCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Elect(tc.view, tc.services)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d decisions, want %d: %+v", len(got), len(tc.want), got)
			}
			for a, w := range tc.want {
				checkDecision(t, decisionFor(t, got, a), w)
			}
		})
	}
}

func checkDecision(t *testing.T, d Decision, w want) {
	t.Helper()
	wantOwner := ""
	if len(w.candidates) > 0 {
		wantOwner = w.candidates[0]
	}
	if d.Owner != wantOwner {
		t.Errorf("%s: owner %q, want %q (candidates %v, reason %s: %s)", d.IP, d.Owner, wantOwner, d.Candidates, d.Reason, d.Message)
	}
	if listed := w.candidates[:min(MaxCandidates, len(w.candidates))]; !slices.Equal(d.Candidates, listed) {
		t.Errorf("%s: candidates %v, want %v", d.IP, d.Candidates, listed)
	}
	if d.Reason != w.reason {
		t.Errorf("%s: reason %q, want %q (%s)", d.IP, d.Reason, w.reason, d.Message)
	}
	if (d.Reason == "") != (d.Message == "") {
		t.Errorf("%s: reason %q with message %q", d.IP, d.Reason, d.Message)
	}
	if w.message != "" && d.Message != w.message {
		t.Errorf("%s: message\n got %q\nwant %q", d.IP, d.Message, w.message)
	}
	if !slices.Equal(d.Interfaces, w.interfaces) || (d.Interfaces == nil) != (w.interfaces == nil) {
		t.Errorf("%s: interfaces %#v, want %#v", d.IP, d.Interfaces, w.interfaces)
	}
	if !slices.Equal(d.Unserved, w.unserved) {
		t.Errorf("%s: unserved %v, want %v", d.IP, d.Unserved, w.unserved)
	}
}

// owned is a want with an owner: candidates in the given order.
func owned(candidates []string) want { return want{candidates: candidates} }

// none is a want without an owner.
func none(r Reason) want { return want{reason: r} }
