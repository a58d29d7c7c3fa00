package speaker

import (
	"testing"

	"herald.dev/herald/speaker/quorum"
)

func TestWriteReason(t *testing.T) {
	base := recordWish{members: []string{"a", "b"}, unreachable: []string{"c"}, macs: []string{"m1"}, mode: quorum.ModeQuorum, askers: []string{"c"}}
	with := func(f func(*recordWish)) recordWish {
		w := base
		f(&w)
		return w
	}
	for _, tc := range []struct {
		name    string
		written *recordWish
		wish    recordWish
		want    string
	}{
		{"nothing written", nil, base, writeStart},
		{"mode and view", &base, with(func(w *recordWish) { w.mode = quorum.ModeHold; w.members = []string{"a"} }), writeMode},
		{"members", &base, with(func(w *recordWish) { w.members = []string{"a"} }), writeView},
		{"unreachable", &base, with(func(w *recordWish) { w.unreachable = nil }), writeView},
		{"macs", &base, with(func(w *recordWish) { w.macs = []string{"m2"} }), writeMACs},
		{"new asker", &base, with(func(w *recordWish) { w.askers = []string{"c", "d"} }), writeAnswer},
	} {
		if got := writeReason(tc.written, tc.wish); got != tc.want {
			t.Errorf("%s: writeReason = %q, want %q", tc.name, got, tc.want)
		}
	}
}
