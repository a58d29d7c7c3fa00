package quorum

import (
	"testing"
	"time"
)

func TestRenewFast(t *testing.T) {
	now := time.Unix(1000, 0)
	rec := func(node string, mode Mode, unreachable ...string) Record {
		return Record{Node: node, Mode: mode, Unreachable: unreachable, RenewedAt: now.Add(-time.Second), Duration: 30 * time.Second}
	}
	stale := rec("c", ModeArbitrated)
	stale.RenewedAt = now.Add(-time.Minute)
	cases := []struct {
		name    string
		mode    Mode
		records []Record
		want    bool
	}{
		{"all well", ModeQuorum, []Record{rec("a", ModeQuorum), rec("b", ModeQuorum)}, false},
		{"itself degraded", ModeMinority, []Record{rec("b", ModeQuorum)}, true},
		{"itself rejoining", ModeRejoining, nil, true},
		{"a peer misses a dead node", ModeQuorum, []Record{rec("b", ModeQuorum, "c"), rec("c", ModeQuorum)}, false},
		{"a peer misses this one", ModeQuorum, []Record{rec("b", ModeQuorum, "a")}, true},
		{"a peer holds", ModeQuorum, []Record{rec("b", ModeHold)}, true},
		{"a peer arbitrates", ModeQuorum, []Record{rec("b", ModeArbitrated)}, true},
		// A node cut off from memberlist lists everyone as unreachable for the whole cut.
		{"a deposed peer that misses this one", ModeQuorum, []Record{rec("b", ModeMinority, "a")}, false},
		{"a rejoining peer that does not hear this one yet", ModeQuorum, []Record{rec("b", ModeRejoining, "a")}, false},
		{"an isolated peer", ModeQuorum, []Record{rec("b", ModeIsolated, "a")}, false},
		{"a deposed peer that misses another", ModeQuorum, []Record{rec("b", ModeMinority, "c")}, false},
		{"a stale arbitrating record", ModeQuorum, []Record{stale}, false},
		{"its own record", ModeQuorum, []Record{rec("a", ModeHold, "a")}, false},
	}
	for _, c := range cases {
		if got := RenewFast("a", c.mode, c.records, now); got != c.want {
			t.Errorf("%s: RenewFast = %v, want %v", c.name, got, c.want)
		}
	}
}
