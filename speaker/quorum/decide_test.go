package quorum

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

const ttl = 15 * time.Second

// at is t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// rec is a record of node listing members, renewed and last seen changing at changed.
func rec(node string, changed time.Duration, members ...string) Record {
	return Record{Node: node, Members: members, Mode: ModeQuorum, RenewedAt: at(changed), Duration: ttl, ChangedAt: at(changed)}
}

// heard are members live since t0-1m unless given as "name@offset".
func heard(names ...string) []Member {
	var out []Member
	for _, n := range names {
		m := Member{Name: n, Since: at(-time.Minute)}
		if name, off, ok := strings.Cut(n, "@"); ok {
			d, err := time.ParseDuration(off)
			if err != nil {
				panic(err)
			}
			m = Member{Name: name, Since: at(d)}
		}
		out = append(out, m)
	}
	return out
}

func withMode(r Record, m Mode) Record { r.Mode = m; return r }

// serving is the State of a speaker that announced normally until now.
var serving = State{Started: true}

func TestDecide(t *testing.T) {
	cfg := DefaultConfig()
	now := at(0)
	tests := []struct {
		name string
		st   State
		in   Input
		// want
		mode        Mode
		electors    []string
		take        bool
		unreachable []string
		majority    []string
	}{
		{
			name: "healthy cluster elects among the members it hears",
			st:   serving,
			in: Input{Self: "a", Members: heard("a", "b", "c"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -time.Second, "a", "b", "c"), rec("b", -time.Second, "a", "b", "c"), rec("c", -time.Second, "a", "b", "c")}},
			mode: ModeQuorum, electors: []string{"a", "b", "c"}, take: true,
		},
		{
			name: "a lone speaker without records is its own majority",
			st:   serving,
			in:   Input{Self: "a", Members: heard("a"), APIUp: true, Now: now},
			mode: ModeQuorum, electors: []string{"a"}, take: true,
		},
		{
			name: "the majority side of a one-node cut keeps the fast path once the cut-off node let go",
			st:   serving,
			in: Input{Self: "a", Members: heard("a", "b"), APIUp: true, APIAt: now, Now: now, Lost: map[string]time.Time{"c": at(-2 * time.Second)},
				Records: []Record{rec("a", -time.Second, "a", "b"), rec("b", -time.Second, "a", "b"), withMode(rec("c", -time.Second, "c"), ModeMinority)}},
			mode: ModeQuorum, electors: []string{"a", "b"}, take: true, unreachable: []string{"c"},
		},
		{
			name: "a cut-off node still announcing keeps its IPs in the majority's election until it lets go",
			st:   serving,
			in: Input{Self: "a", Members: heard("a", "b"), APIUp: true, APIAt: now, Now: now, Lost: map[string]time.Time{"c": at(-2 * time.Second)},
				Records: []Record{rec("a", -time.Second, "a", "b"), rec("b", -time.Second, "a", "b"), rec("c", -time.Second, "a", "b", "c")}},
			mode: ModeQuorum, electors: []string{"a", "b", "c"}, take: true, unreachable: []string{"c"},
		},
		{
			name: "a node that died renews nothing after it was lost: not waited for",
			st:   serving,
			in: Input{Self: "a", Members: heard("a", "b"), APIUp: true, APIAt: now, Now: now, Lost: map[string]time.Time{"c": at(-time.Second)},
				Records: []Record{rec("a", -time.Second, "a", "b"), rec("b", -time.Second, "a", "b"), rec("c", -3*time.Second, "a", "b", "c")}},
			mode: ModeQuorum, electors: []string{"a", "b"}, take: true, unreachable: []string{"c"},
		},
		{
			name: "a record not seen changing since this speaker started proves nothing",
			st:   serving,
			in: Input{Self: "a", Members: heard("a", "b"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("b", -time.Second, "a", "b"), {Node: "c", Members: []string{"a", "b", "c"}, Mode: ModeQuorum, RenewedAt: at(-time.Second), Duration: ttl}}},
			mode: ModeQuorum, electors: []string{"a", "b"}, take: true, unreachable: []string{"c"},
		},
		{
			name: "the cut-off node is deposed by the majority's records, even while memberlist still lists its peers",
			st:   serving,
			in: Input{Self: "c", Members: heard("a", "b", "c"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -time.Second, "a", "b"), rec("b", -time.Second, "a", "b"), rec("c", -2*time.Second, "a", "b", "c")}},
			mode: ModeMinority, majority: []string{"a", "b"},
		},
		{
			name: "the cut-off node that hears nobody yet and whose peers have not republished holds",
			st:   serving,
			in: Input{Self: "c", Members: heard("c"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -3*time.Second, "a", "b", "c"), rec("b", -3*time.Second, "a", "b", "c")}},
			mode: ModeHold, electors: []string{"c"}, unreachable: []string{"a", "b"},
		},
		{
			name: "a record of a peer it does not hear is stale when a member of its majority vouches for us",
			st:   serving,
			in: Input{Self: "c", Members: heard("c"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -time.Second, "a", "b"), rec("b", -3*time.Second, "a", "b", "c")}},
			mode: ModeHold, electors: []string{"c"}, unreachable: []string{"a", "b"},
		},
		{
			name: "a returning node stays deposed while a peer it hears again still excludes it",
			st:   serving,
			in: Input{Self: "c", Members: heard("a@-100ms", "b@-100ms", "c"), APIUp: true, APIAt: now, RecordsReadAt: now, Now: now,
				Records: []Record{rec("a", -5*time.Second, "a", "b"), rec("b", -5*time.Second, "a", "b")}},
			mode: ModeMinority, majority: []string{"a", "b"},
		},
		{
			name: "one peer republished: the other, heard and still excluding us, keeps us out",
			st:   serving,
			in: Input{Self: "c", Members: heard("a@-100ms", "b@-100ms", "c"), APIUp: true, APIAt: now, RecordsReadAt: now, Now: now,
				Records: []Record{rec("a", -50*time.Millisecond, "a", "b", "c"), rec("b", -5*time.Second, "a", "b")}},
			mode: ModeMinority, majority: []string{"b"},
		},
		{
			name: "a silent node coming back does not depose the peers it does not hear yet",
			st:   serving,
			in: Input{Self: "b", Members: heard("a", "b", "c@-100ms"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -time.Second, "a", "b", "c"), withMode(rec("c", -50*time.Millisecond, "a", "c"), ModeMinority)}},
			mode: ModeQuorum, electors: []string{"a", "b", "c"}, take: true,
		},
		{
			// A node back from a cable pull hears its peers one by one and publishes,
			// silent, a majority without the one it has not heard yet; that peer has
			// not heard it either, and another peer, hit by the returning node's
			// rumour of its death, briefly lists it no longer.
			name: "a silent node coming back does not depose a peer that has not heard it yet",
			st:   serving,
			in: Input{Self: "b", Members: heard("a", "b"), APIUp: true, APIAt: now, Now: now, Lost: map[string]time.Time{"c": at(-time.Second)},
				Records: []Record{withMode(rec("a", -10*time.Millisecond, "a"), ModeHold), withMode(rec("c", -50*time.Millisecond, "a", "c"), ModeMinority)}},
			mode: ModeQuorum, electors: []string{"a", "b"}, take: true, unreachable: []string{"c"},
		},
		{
			// At a heal, e (back from the cut-off side) hears four of five and publishes,
			// announcing, a majority without b, which has only just heard e join; a, c
			// and d hear b and say so. b keeps its IPs: e's view is behind, not a
			// majority against b (deposed at once, b's VIPs failed back to e).
			name: "a peer that just joined publishes a majority without us that its members contradict",
			st:   serving,
			in: Input{Self: "b", Members: heard("a", "b", "c", "d", "e@-50ms"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -time.Second, "a", "b", "c", "d"), rec("c", -time.Second, "a", "b", "c", "d"),
					rec("d", -time.Second, "a", "b", "c", "d"), rec("e", -10*time.Millisecond, "a", "c", "d", "e")}},
			mode: ModeQuorum, electors: []string{"a", "b", "c", "d", "e"}, take: true,
		},
		{
			name: "a forming split: a peer heard for long sees a majority without us, but a member of it still lists us",
			st:   serving,
			in: Input{Self: "c", Members: heard("b", "c", "d"), APIUp: true, APIAt: now, Now: now, Lost: map[string]time.Time{"a": at(-50 * time.Millisecond)},
				Records: []Record{rec("a", -100*time.Millisecond, "a", "b", "d"), rec("b", -100*time.Millisecond, "a", "b", "d"), rec("d", -100*time.Millisecond, "b", "c", "d")}},
			mode: ModeQuorum, electors: []string{"b", "c", "d"}, take: true, unreachable: []string{"a"},
		},
		{
			name: "a record written before its writer rejoined deposes no longer than JoinWait (API server down)",
			st:   serving,
			in: Input{Self: "c", Members: heard("a@-3s", "b@-3s", "c"), APIUp: false, APIAt: at(-10 * time.Second), Now: now,
				Records: []Record{rec("a", -11*time.Second, "a", "b"), rec("b", -11*time.Second, "a", "b")}},
			mode: ModeQuorum, electors: []string{"a", "b", "c"}, take: true,
		},
		{
			name: "even split of two, at first: hold",
			st:   serving,
			in: Input{Self: "a", Members: heard("a"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -time.Second, "a", "b"), rec("b", -time.Second, "a", "b")}},
			mode: ModeHold, electors: []string{"a"}, unreachable: []string{"b"},
		},
		{
			name: "even split of two after Grace: both alive in the API server, the same electors as before the split",
			st:   State{Started: true, TroubleSince: at(-2 * time.Second)},
			in: Input{Self: "a", Members: heard("a"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -100*time.Millisecond, "a"), rec("b", -300*time.Millisecond, "b")}},
			mode: ModeArbitrated, electors: []string{"a", "b"}, take: true, unreachable: []string{"b"},
		},
		{
			name: "arbitrating while a peer still holds: take nothing yet",
			st:   State{Started: true, TroubleSince: at(-2 * time.Second)},
			in: Input{Self: "a", Members: heard("a"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -100*time.Millisecond, "a"), withMode(rec("b", -300*time.Millisecond, "b"), ModeHold)}},
			mode: ModeArbitrated, electors: []string{"a", "b"}, take: false, unreachable: []string{"b"},
		},
		{
			name: "two nodes, the peer died: it renews no more, so it is no elector",
			st:   State{Started: true, TroubleSince: at(-2 * time.Second)},
			in: Input{Self: "a", Members: heard("a"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -100*time.Millisecond, "a"), rec("b", -4*time.Second, "a", "b")}},
			mode: ModeArbitrated, electors: []string{"a"}, take: true, unreachable: []string{"b"},
		},
		{
			name: "no majority after Grace and no API server: silent",
			st:   State{Started: true, TroubleSince: at(-2 * time.Second)},
			in: Input{Self: "a", Members: heard("a"), APIUp: false, APIAt: at(-3 * time.Second), Now: now,
				Records: []Record{rec("a", -3*time.Second, "a", "b"), rec("b", -4*time.Second, "a", "b")}},
			mode: ModeIsolated, unreachable: []string{"b"},
		},
		{
			name: "records do not expire while we cannot write ours",
			st:   serving,
			in: Input{Self: "a", Members: heard("a", "b"), APIUp: false, APIAt: at(-time.Minute), Now: now,
				Records: []Record{rec("a", -61*time.Second, "a", "b", "c", "d"), rec("c", -61*time.Second, "a", "b", "c", "d"), rec("d", -61*time.Second, "a", "b", "c", "d")}},
			mode: ModeHold, electors: []string{"a", "b"}, unreachable: []string{"c", "d"},
		},
		{
			name: "a record that expired (a Node gone for good) no longer counts",
			st:   serving,
			in: Input{Self: "a", Members: heard("a"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -time.Second, "a"), rec("b", -time.Minute, "a", "b")}},
			mode: ModeQuorum, electors: []string{"a"}, take: true,
		},
		{
			name: "cable out: silent at once",
			st:   serving,
			in: Input{Self: "a", Members: heard("a", "b", "c"), APIUp: true, APIAt: now, Now: now, LinkDown: true,
				Records: []Record{rec("a", -time.Second, "a", "b", "c")}},
			mode: ModeIsolated,
		},
		{
			name: "even split of four holds, then arbitrates among all four",
			st:   State{Started: true, TroubleSince: at(-2 * time.Second)},
			in: Input{Self: "a", Members: heard("a", "b"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -100*time.Millisecond, "a", "b"), rec("b", -200*time.Millisecond, "a", "b"), rec("c", -300*time.Millisecond, "c", "d"), rec("d", -400*time.Millisecond, "c", "d")}},
			mode: ModeArbitrated, electors: []string{"a", "b", "c", "d"}, take: true, unreachable: []string{"c", "d"},
		},
		{
			name: "one of four cut off: three are a majority and depose it",
			st:   serving,
			in: Input{Self: "d", Members: heard("d"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("a", -100*time.Millisecond, "a", "b", "c"), rec("b", -100*time.Millisecond, "a", "b", "c"), rec("c", -100*time.Millisecond, "a", "b", "c")}},
			mode: ModeMinority, majority: []string{"a", "b", "c"}, unreachable: []string{"a", "b", "c"},
		},
		{
			name: "a dead speaker's stale majority does not depose a node its live peers vouch for",
			st:   serving,
			in: Input{Self: "a", Members: heard("a", "b", "c"), APIUp: true, APIAt: now, Now: now, Lost: map[string]time.Time{"d": at(-3 * time.Second)},
				Records: []Record{rec("b", -time.Second, "a", "b", "c"), rec("c", -time.Second, "a", "b", "c"), rec("d", -5*time.Second, "b", "c", "d")}},
			mode: ModeQuorum, electors: []string{"a", "b", "c"}, take: true, unreachable: []string{"d"},
		},
		{
			name: "a half that is no majority deposes nobody",
			st:   serving,
			in: Input{Self: "a", Members: heard("a", "b"), APIUp: true, APIAt: now, Now: now,
				Records: []Record{rec("c", -time.Second, "c", "d"), rec("d", -time.Second, "c", "d")}},
			mode: ModeHold, electors: []string{"a", "b"}, unreachable: []string{"c", "d"},
		},
		{
			name: "a just-started speaker needs the records read once",
			st:   State{},
			in: Input{Self: "a", Members: heard("a", "b"), APIUp: true, Now: now,
				Records: []Record{rec("b", -time.Second, "a", "b")}},
			mode: ModeRejoining,
		},
		{
			name: "a just-started speaker with the records read elects",
			st:   State{},
			in: Input{Self: "a", Members: heard("a", "b"), APIUp: true, Now: now, RecordsReadAt: at(-10 * time.Millisecond),
				Records: []Record{rec("b", -time.Second, "a", "b")}},
			mode: ModeQuorum, electors: []string{"a", "b"}, take: true,
		},
		{
			name: "leaving silence needs records read after it began",
			st:   State{Started: true, Silent: true, SilentSince: at(-time.Second)},
			in: Input{Self: "c", Members: heard("a", "b", "c"), APIUp: true, APIAt: now, Now: now, RecordsReadAt: at(-2 * time.Second),
				Records: []Record{rec("a", -100*time.Millisecond, "a", "b", "c"), rec("b", -100*time.Millisecond, "a", "b", "c")}},
			mode: ModeRejoining,
		},
		{
			name: "leaving silence with fresh records",
			st:   State{Started: true, Silent: true, SilentSince: at(-time.Second)},
			in: Input{Self: "c", Members: heard("a", "b", "c"), APIUp: true, APIAt: now, Now: now, RecordsReadAt: at(-10 * time.Millisecond),
				Records: []Record{rec("a", -100*time.Millisecond, "a", "b", "c"), rec("b", -100*time.Millisecond, "a", "b", "c")}},
			mode: ModeQuorum, electors: []string{"a", "b", "c"}, take: true,
		},
		{
			name: "a silent speaker without majority holds nothing: it stays silent",
			st:   State{Started: true, Silent: true, SilentSince: at(-time.Second), TroubleSince: at(-500 * time.Millisecond)},
			in: Input{Self: "a", Members: heard("a"), APIUp: true, APIAt: now, Now: now, RecordsReadAt: now,
				Records: []Record{rec("b", -time.Second, "a", "b")}},
			mode: ModeRejoining, unreachable: []string{"b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := Decide(cfg, tc.st, tc.in)
			if v.Mode != tc.mode {
				t.Fatalf("mode %s (%s), want %s", v.Mode, v.Reason, tc.mode)
			}
			if !slices.Equal(v.Electors, tc.electors) {
				t.Errorf("electors %v, want %v", v.Electors, tc.electors)
			}
			if v.Take != tc.take {
				t.Errorf("take %v, want %v", v.Take, tc.take)
			}
			if !slices.Equal(v.Unreachable, tc.unreachable) {
				t.Errorf("unreachable %v, want %v", v.Unreachable, tc.unreachable)
			}
			if !slices.Equal(v.Majority, tc.majority) {
				t.Errorf("majority %v, want %v", v.Majority, tc.majority)
			}
			if v.Mode.Silent() && (len(v.Electors) > 0 || v.Take) {
				t.Errorf("silent mode %s with electors %v take %v", v.Mode, v.Electors, v.Take)
			}
			if v.NeedRecords && v.Mode != ModeRejoining {
				t.Errorf("mode %s with NeedRecords", v.Mode)
			}
			if v.Mode != ModeQuorum && v.Reason == "" {
				t.Errorf("mode %s without a reason", v.Mode)
			}
		})
	}
}

// TestDecideStates follows one speaker through a cut and its heal, the state carried
// from call to call as the speaker carries it.
func TestDecideStates(t *testing.T) {
	cfg := DefaultConfig()
	var st State
	step := func(in Input, want Mode) Verdict {
		t.Helper()
		in.Self, in.APIUp, in.APIAt = "c", true, in.Now
		var v Verdict
		v, st = Decide(cfg, st, in)
		if v.Mode != want {
			t.Fatalf("at %v: mode %s (%s), want %s", in.Now.Sub(t0), v.Mode, v.Reason, want)
		}
		return v
	}
	all := []Record{rec("a", -time.Second, "a", "b", "c"), rec("b", -time.Second, "a", "b", "c"), rec("c", -time.Second, "a", "b", "c")}
	step(Input{Members: heard("a", "b", "c"), Records: all, Now: at(0), RecordsReadAt: at(0)}, ModeQuorum)
	// Cut: the majority republishes without c before c's memberlist notices. c still
	// hears them all: it waits Grace from the change before it counts as deposed (a
	// rumour would be over by then), and is told when to decide again.
	cut := []Record{rec("a", 900*time.Millisecond, "a", "b"), rec("b", 900*time.Millisecond, "a", "b"), all[2]}
	v := step(Input{Members: heard("a", "b", "c"), Records: cut, Now: at(time.Second), RecordsReadAt: at(0)}, ModeQuorum)
	if want := at(900*time.Millisecond + cfg.Grace); !v.DecideAgainAt.Equal(want) {
		t.Fatalf("deposition pending: decide again at %v, want %v", v.DecideAgainAt.Sub(t0), want.Sub(t0))
	}
	step(Input{Members: heard("a", "b", "c"), Records: cut, Now: at(900*time.Millisecond + cfg.Grace), RecordsReadAt: at(0)}, ModeMinority)
	if !st.Silent {
		t.Fatal("a deposed speaker is not recorded as silent")
	}
	// c's memberlist notices: still deposed (the peers' records are about peers it
	// does not hear, and nobody vouches for it).
	step(Input{Members: heard("c"), Records: cut, Now: at(3 * time.Second), RecordsReadAt: at(0)}, ModeMinority)
	// Heal: c hears a and b again at 10 s; their records still exclude it.
	back := heard("a@10s", "b@10s", "c")
	step(Input{Members: back, Records: cut, Now: at(10 * time.Second), RecordsReadAt: at(0)}, ModeMinority)
	// a republishes with c, b not yet: c is no longer deposed by a (it lists c), nor by
	// b (a vouches for c) but b may still stand in for it: c takes nothing yet.
	halfway := []Record{rec("a", 10100*time.Millisecond, "a", "b", "c"), rec("b", 5*time.Second, "a", "b")}
	back = heard("a@10s", "b@7s", "c")
	step(Input{Members: back, Records: halfway, Now: at(10200 * time.Millisecond), RecordsReadAt: at(0)}, ModeRejoining)
	// Records read: c is back in a majority but stays silent until b hears it.
	step(Input{Members: back, Records: halfway, Now: at(10210 * time.Millisecond), RecordsReadAt: at(10205 * time.Millisecond)}, ModeRejoining)
	healed := []Record{rec("a", 10100*time.Millisecond, "a", "b", "c"), rec("b", 10300*time.Millisecond, "a", "b", "c")}
	if v := step(Input{Members: back, Records: healed, Now: at(10400 * time.Millisecond), RecordsReadAt: at(10205 * time.Millisecond)}, ModeQuorum); !v.Take {
		t.Fatalf("every peer hears c: it still takes nothing (%s)", v.Reason)
	}
	if st.Silent || !st.TroubleSince.IsZero() {
		t.Fatalf("state after the heal: %+v", st)
	}
}

// TestDecideRumour: a member back from a partition gossips that c is dead; a and b
// believe it for a moment and publish majorities without c, then hear c refute it and
// publish it again, within Grace. c, which heard them all along, never goes silent.
// Had c not heard them (a real cut), it would have been deposed at once.
func TestDecideRumour(t *testing.T) {
	cfg := DefaultConfig()
	st := State{Started: true}
	all := []Record{rec("a", -time.Second, "a", "b", "c"), rec("b", -time.Second, "a", "b", "c")}
	in := Input{Self: "c", Members: heard("a", "b", "c"), APIUp: true, APIAt: at(0), RecordsReadAt: at(0), Records: all, Now: at(0)}
	v, st := Decide(cfg, st, in)
	if v.Mode != ModeQuorum {
		t.Fatalf("before the rumour: %s (%s)", v.Mode, v.Reason)
	}
	in.Records = []Record{rec("a", 100*time.Millisecond, "a", "b"), rec("b", 120*time.Millisecond, "a", "b")}
	in.Now = at(150 * time.Millisecond)
	v, st = Decide(cfg, st, in)
	if v.Mode != ModeQuorum || v.DecideAgainAt.IsZero() {
		t.Fatalf("rumour believed: %s (%s), decide again at %v; want Quorum and a time to decide again", v.Mode, v.Reason, v.DecideAgainAt)
	}
	in.Records = []Record{rec("a", 400*time.Millisecond, "a", "b", "c"), rec("b", 450*time.Millisecond, "a", "b", "c")}
	in.Now = at(500 * time.Millisecond)
	v, _ = Decide(cfg, st, in)
	if v.Mode != ModeQuorum || !v.DecideAgainAt.IsZero() {
		t.Fatalf("rumour refuted: %s (%s), decide again at %v; want Quorum and nothing pending", v.Mode, v.Reason, v.DecideAgainAt)
	}

	cut := Input{Self: "c", Members: heard("c"), APIUp: true, APIAt: at(0), RecordsReadAt: at(0), Now: at(150 * time.Millisecond),
		Records: []Record{rec("a", 100*time.Millisecond, "a", "b"), rec("b", 120*time.Millisecond, "a", "b")}}
	if v, _ := Decide(cfg, State{Started: true}, cut); v.Mode != ModeMinority {
		t.Fatalf("cut off, deposed by a majority it does not hear: %s (%s), want Minority at once", v.Mode, v.Reason)
	}
}

// TestDecideMutualRumour: c comes back from a cut and passes on the deaths it declared
// meanwhile; a and b each believe the other dead for a moment and write it, then hear
// c and each other again within a second. b heard a majority (b, c) before a joined
// its view again, so a's passing record, outvoted by c's, does not depose it.
func TestDecideMutualRumour(t *testing.T) {
	cfg := DefaultConfig()
	in := Input{Self: "b", Members: heard("a@-100ms", "b", "c@-900ms"), APIUp: true, APIAt: at(0), RecordsReadAt: at(0), Now: at(0),
		Records: []Record{rec("a", -500*time.Millisecond, "a", "c"), withMode(rec("c", -300*time.Millisecond, "b", "c"), ModeRejoining)}}
	if v, _ := Decide(cfg, serving, in); v.Mode != ModeQuorum {
		t.Fatalf("b, hearing c before a joined again: %s (%s), want Quorum", v.Mode, v.Reason)
	}
	// Had b heard a and c join together, it could be the one back: a deposes it.
	in.Members = heard("a@-100ms", "b", "c@-100ms")
	if v, _ := Decide(cfg, serving, in); v.Mode != ModeMinority {
		t.Fatalf("b, hearing a and c join at once: %s (%s), want Minority", v.Mode, v.Reason)
	}
}

// TestDecideMutualRumourUnheard: as above, but b has not heard a again yet. b lost a to
// the rumour while it heard a majority (b and c) and was in Quorum all along; a's
// record left b out after that, and c's, written while c was still coming back, does
// not list b yet. b waits Grace before it counts as deposed (the rumour is refuted
// well before), and does not wait if it was not in Quorum all along: then it may be
// the one coming back.
func TestDecideMutualRumourUnheard(t *testing.T) {
	cfg := DefaultConfig()
	in := Input{Self: "b", Members: heard("b", "c@-200ms"), Lost: map[string]time.Time{"a": at(-150 * time.Millisecond)},
		APIUp: true, APIAt: at(0), RecordsReadAt: at(0), Now: at(0),
		Records: []Record{rec("a", -100*time.Millisecond, "a", "c"), withMode(rec("c", -300*time.Millisecond, "c"), ModeRejoining)}}
	inQuorum := State{Started: true, QuorumSince: at(-time.Minute)}
	v, st := Decide(cfg, inQuorum, in)
	if v.Mode != ModeQuorum {
		t.Fatalf("b, in Quorum all along and losing a to a rumour: %s (%s), want Quorum", v.Mode, v.Reason)
	}
	if want := at(-100*time.Millisecond + cfg.Grace); !v.DecideAgainAt.Equal(want) {
		t.Fatalf("deposition pending: decide again at %v, want %v", v.DecideAgainAt.Sub(t0), want.Sub(t0))
	}
	if !st.QuorumSince.Equal(at(-time.Minute)) {
		t.Fatalf("QuorumSince moved to %v while in Quorum", st.QuorumSince.Sub(t0))
	}
	// A lasting cut between a and b: deposed once a's record has said so for Grace.
	in.Now = at(-100*time.Millisecond + cfg.Grace)
	if v, st := Decide(cfg, st, in); v.Mode != ModeMinority || !st.QuorumSince.IsZero() {
		t.Fatalf("a's record without b for Grace: %s (%s), QuorumSince %v; want Minority and none", v.Mode, v.Reason, st.QuorumSince)
	}
	// In Quorum only since after a's record left b out: b may be the one back.
	in.Now = at(0)
	if v, _ := Decide(cfg, State{Started: true, QuorumSince: at(-50 * time.Millisecond)}, in); v.Mode != ModeMinority {
		t.Fatalf("b, in Quorum only since after a left it out: %s (%s), want Minority at once", v.Mode, v.Reason)
	}
	if v, _ := Decide(cfg, serving, in); v.Mode != ModeMinority {
		t.Fatalf("b, not known to be in Quorum before: %s (%s), want Minority at once", v.Mode, v.Reason)
	}
}

// TestDecideJoining follows a node coming back after its cable was out: memberlist
// reaches its peers one by one, and until it hears all of them its record says it
// announces nothing, so the peer it does not hear yet is not deposed by it.
func TestDecideJoining(t *testing.T) {
	cfg := DefaultConfig()
	st := State{Started: true, Silent: true, SilentSince: at(-10 * time.Second)}
	step := func(self string, in Input, want Mode) Verdict {
		t.Helper()
		in.Self, in.APIUp, in.APIAt, in.RecordsReadAt = self, true, in.Now, in.Now
		// c is the node coming back; a and b served all along.
		own := serving
		if self == "c" {
			own = st
		}
		v, next := Decide(cfg, own, in)
		if self == "c" {
			st = next
		}
		if v.Mode != want {
			t.Fatalf("%s at %v: mode %s (%s), want %s", self, in.Now.Sub(t0), v.Mode, v.Reason, want)
		}
		return v
	}
	// a and b served without c and both already hear it again; c hears only b so far.
	peers := []Record{rec("a", -100*time.Millisecond, "a", "b", "c"), rec("b", -100*time.Millisecond, "a", "b", "c")}
	v := step("c", Input{Members: heard("b@-50ms", "c"), Records: peers, Now: at(0)}, ModeRejoining)
	if !strings.Contains(v.Reason, "hears a") {
		t.Errorf("reason %q does not name the peer c waits to hear", v.Reason)
	}
	// What a reads meanwhile: c's record, written now, lists b and c, a majority
	// without a, from a node a heard join 100 ms ago. It deposes nobody.
	cRec := withMode(rec("c", 0, "b", "c"), v.Mode)
	step("a", Input{Members: heard("a", "b", "c@-100ms"), Records: append(slices.Clone(peers), cRec), Now: at(10 * time.Millisecond)}, ModeQuorum)
	// Published as announcing, it deposes a only if no member of its majority lists a:
	// here b does, so a keeps serving; without b's word a goes silent at once.
	step("a", Input{Members: heard("a", "b", "c@-100ms"), Records: append(slices.Clone(peers), withMode(cRec, ModeQuorum)), Now: at(10 * time.Millisecond)}, ModeQuorum)
	unvouched := []Record{peers[0], rec("b", -100*time.Millisecond, "b", "c"), withMode(cRec, ModeQuorum)}
	step("a", Input{Members: heard("a", "b", "c@-100ms"), Records: unvouched, Now: at(10 * time.Millisecond)}, ModeMinority)
	// c hears a too: it announces.
	if v := step("c", Input{Members: heard("a@200ms", "b@-50ms", "c"), Records: peers, Now: at(200 * time.Millisecond)}, ModeQuorum); !v.Take {
		t.Fatalf("c hears every peer and every peer lists it, and takes nothing (%s)", v.Reason)
	}

	// A peer c never hears again (it died; its record is still fresh) holds c back
	// no longer than JoinWait.
	st = State{Started: true, Silent: true, SilentSince: at(-10 * time.Second)}
	step("c", Input{Members: heard("b@-50ms", "c"), Records: peers, Now: at(0)}, ModeRejoining)
	step("c", Input{Members: heard("b@-50ms", "c"), Records: peers, Now: at(cfg.JoinWait - time.Millisecond)}, ModeRejoining)
	if v := step("c", Input{Members: heard("b@-50ms", "c"), Records: peers, Now: at(cfg.JoinWait)}, ModeQuorum); !v.Take {
		t.Fatalf("after JoinWait c still takes nothing (%s)", v.Reason)
	}
}

// TestDecideRestartedTogether: every speaker killed and started again at once. a
// and b hear each other first; c, which has claims to take back, has written its
// record (Restarting) but memberlist has not brought it in yet. a and b wait to hear
// it before they take anything (they would take its IPs); for at most JoinWait.
func TestDecideRestartedTogether(t *testing.T) {
	cfg := DefaultConfig()
	// Records from before the kill, renewed 1 s ago; c's rewritten at its start.
	old := []Record{rec("a", -time.Second, "a", "b", "c"), rec("b", -time.Second, "a", "b", "c")}
	cRestarting := withMode(rec("c", -50*time.Millisecond, "c"), ModeRestarting)
	step := func(st State, in Input, want Mode) (Verdict, State) {
		t.Helper()
		in.Self, in.APIUp, in.APIAt, in.RecordsReadAt = "a", true, in.Now, in.Now
		v, next := Decide(cfg, st, in)
		if v.Mode != want {
			t.Fatalf("a at %v: mode %s (%s), want %s", in.Now.Sub(t0), v.Mode, v.Reason, want)
		}
		return v, next
	}
	recs := append(slices.Clone(old), cRestarting)
	v, st := step(State{}, Input{Members: heard("a@-20ms", "b@-20ms"), Records: recs, Now: at(0)}, ModeRejoining)
	if v.Take || !strings.Contains(v.Reason, "it hears c") {
		t.Errorf("a takes %v and gives the reason %q; want no takeover until it hears c", v.Take, v.Reason)
	}
	_, st = step(st, Input{Members: heard("a@-20ms", "b@-20ms"), Records: recs, Now: at(cfg.JoinWait - time.Millisecond)}, ModeRejoining)
	if v, _ := step(st, Input{Members: heard("a@-20ms", "b@-20ms", "c@-1ms"), Records: recs, Now: at(cfg.JoinWait - time.Millisecond)}, ModeQuorum); !v.Take {
		t.Fatalf("a hears c and takes nothing (%s)", v.Reason)
	}
	// A restarting peer that never comes holds a back no longer than JoinWait.
	if v, _ := step(st, Input{Members: heard("a@-20ms", "b@-20ms"), Records: recs, Now: at(cfg.JoinWait)}, ModeQuorum); !v.Take {
		t.Fatalf("after JoinWait a still takes nothing (%s)", v.Reason)
	}
	// A peer that only rejoins (nothing to take back) is not waited for: it takes
	// what the election gives it, like any newcomer.
	recs[2] = withMode(cRestarting, ModeRejoining)
	step(State{}, Input{Members: heard("a@-20ms", "b@-20ms"), Records: recs, Now: at(0)}, ModeQuorum)

	// c itself: restarted with claims, its verdicts while it rejoins say Restarting.
	in := Input{Self: "c", Members: heard("c"), Records: old, Restored: true, APIUp: true, APIAt: at(0), RecordsReadAt: at(0), Now: at(0)}
	if v, _ := Decide(cfg, State{}, in); v.Mode != ModeRestarting || !v.Mode.Silent() {
		t.Fatalf("c restarted with claims, hearing nobody: mode %s (%s), want %s", v.Mode, v.Reason, ModeRestarting)
	}
	in.Members = heard("a@-1ms", "b@-1ms", "c")
	if v, _ := Decide(cfg, State{}, in); v.Mode != ModeQuorum {
		t.Fatalf("c restarted with claims, hearing everyone: mode %s (%s), want %s", v.Mode, v.Reason, ModeQuorum)
	}
}

// TestDecideHealReachesPeersFirst: a deposed speaker whose peers hear it again before
// it hears them stays silent, rather than arbitrate with stale claims and take IPs its
// peers still announce; for at most JoinWait, for a cut that lets only one way through.
func TestDecideHealReachesPeersFirst(t *testing.T) {
	cfg := DefaultConfig()
	var st State
	step := func(in Input, want Mode) Verdict {
		t.Helper()
		in.Self, in.APIUp, in.APIAt, in.RecordsReadAt = "c", true, in.Now, in.Now
		var v Verdict
		v, st = Decide(cfg, st, in)
		if v.Mode != want {
			t.Fatalf("at %v: mode %s (%s), want %s", in.Now.Sub(t0), v.Mode, v.Reason, want)
		}
		return v
	}
	all := []Record{rec("a", -time.Second, "a", "b", "c"), rec("b", -time.Second, "a", "b", "c")}
	step(Input{Members: heard("a", "b", "c"), Records: all, Now: at(0)}, ModeQuorum)
	cut := []Record{rec("a", 500*time.Millisecond, "a", "b"), rec("b", 500*time.Millisecond, "a", "b")}
	step(Input{Members: heard("c"), Records: cut, Now: at(time.Second)}, ModeMinority)
	step(Input{Members: heard("c"), Records: cut, Now: at(9 * time.Second)}, ModeMinority)
	// a and b hear c again and republish; c's memberlist has not caught up.
	heal := []Record{rec("a", 9500*time.Millisecond, "a", "b", "c"), rec("b", 9500*time.Millisecond, "a", "b", "c")}
	v := step(Input{Members: heard("c"), Records: heal, Now: at(9600 * time.Millisecond)}, ModeRejoining)
	if !strings.Contains(v.Reason, "a, b hear c") {
		t.Errorf("reason %q does not name the peers that hear c", v.Reason)
	}
	step(Input{Members: heard("c"), Records: heal, Now: at(9600*time.Millisecond + cfg.JoinWait - time.Millisecond)}, ModeRejoining)
	// c hears them: it serves again.
	if v := step(Input{Members: heard("a@11s", "b@11s", "c"), Records: heal, Now: at(11 * time.Second)}, ModeQuorum); !v.Take {
		t.Fatalf("c hears the majority that lists it and takes nothing (%s)", v.Reason)
	}

	// A cut that lets only a and b hear c: c arbitrates after JoinWait.
	st = State{Started: true, Silent: true, SilentSince: at(time.Second), TroubleSince: at(time.Second)}
	step(Input{Members: heard("c"), Records: heal, Now: at(9600 * time.Millisecond)}, ModeRejoining)
	step(Input{Members: heard("c"), Records: heal, Now: at(9600*time.Millisecond + cfg.JoinWait)}, ModeArbitrated)
}
