package quorum

import (
	"slices"
	"testing"
	"time"
)

func TestAskedBy(t *testing.T) {
	now := time.Unix(1000, 0)
	rec := func(node string, mode Mode, unreachable ...string) Record {
		return Record{Node: node, Mode: mode, Unreachable: unreachable, RenewedAt: now.Add(-time.Second), Duration: 30 * time.Second}
	}
	stale := rec("c", ModeArbitrated)
	stale.RenewedAt = now.Add(-time.Minute)
	cases := []struct {
		name    string
		records []Record
		want    []string
	}{
		{"all well", []Record{rec("a", ModeQuorum), rec("b", ModeQuorum)}, nil},
		{"a peer misses a dead node", []Record{rec("b", ModeQuorum, "c"), rec("c", ModeQuorum)}, nil},
		{"a peer misses this one", []Record{rec("b", ModeQuorum, "a")}, []string{"b"}},
		{"a peer holds", []Record{rec("b", ModeHold)}, []string{"b"}},
		{"a peer arbitrates", []Record{rec("b", ModeArbitrated)}, []string{"b"}},
		{"two ask", []Record{rec("c", ModeHold), rec("b", ModeQuorum, "a")}, []string{"b", "c"}},
		// A node cut off from memberlist lists everyone as unreachable for the whole cut.
		{"a deposed peer that misses this one", []Record{rec("b", ModeMinority, "a")}, nil},
		{"a rejoining peer that does not hear this one yet", []Record{rec("b", ModeRejoining, "a")}, nil},
		{"an isolated peer", []Record{rec("b", ModeIsolated, "a")}, nil},
		{"a deposed peer that misses another", []Record{rec("b", ModeMinority, "c")}, nil},
		{"a stale arbitrating record", []Record{stale}, nil},
		{"its own record", []Record{rec("a", ModeHold, "a")}, nil},
	}
	for _, c := range cases {
		if got := AskedBy("a", c.records, now); !slices.Equal(got, c.want) {
			t.Errorf("%s: AskedBy = %v, want %v", c.name, got, c.want)
		}
	}
}
