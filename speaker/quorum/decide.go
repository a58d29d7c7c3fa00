package quorum

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Mode is what a speaker does with its memberlist view.
type Mode string

const (
	// ModeQuorum: it hears a majority and elects among the members it hears.
	ModeQuorum Mode = "Quorum"
	// ModeHold: no majority for less than Grace; it keeps its IPs and takes none.
	ModeHold Mode = "Hold"
	// ModeArbitrated: no majority anywhere; it elects among the speakers alive in the
	// API server.
	ModeArbitrated Mode = "Arbitrated"
	// ModeMinority: a majority of speakers that excludes it serves the IPs; it is silent.
	ModeMinority Mode = "Minority"
	// ModeIsolated: cable out, or no majority and no API server; it is silent.
	ModeIsolated Mode = "Isolated"
	// ModeRejoining: it was silent and waits to read the records afresh.
	ModeRejoining Mode = "Rejoining"
	// ModeRestarting is ModeRejoining for a speaker that has just started with the
	// claims its node's previous speaker saved (Input.Restored): it announces them
	// again once it hears a majority, and its peers coming back at the same moment
	// wait to hear it before they take IPs.
	ModeRestarting Mode = "Restarting"
)

// Silent says whether a speaker in mode m announces nothing.
func (m Mode) Silent() bool {
	return m == ModeMinority || m == ModeIsolated || m == ModeRejoining || m == ModeRestarting
}

// serving says whether a speaker in mode m may announce IPs.
func (m Mode) serving() bool {
	return m == ModeQuorum || m == ModeHold || m == ModeArbitrated
}

// Degraded says whether a speaker in mode m does not hear a majority or is silent:
// its peers renew their records fast while any record says so.
func (m Mode) Degraded() bool { return m != ModeQuorum }

// Record is one speaker's record as this speaker reads it.
type Record struct {
	Node string
	// Members are the memberlist members the writer hears, itself included, and
	// Unreachable the expected speakers it does not hear.
	Members, Unreachable []string
	Mode                 Mode
	// RenewedAt is when the writer last renewed it, by the writer's clock, and
	// Duration how long it stays fresh after that.
	RenewedAt time.Time
	Duration  time.Duration
	// ChangedAt is when this speaker last saw the record change, by its own clock
	// (immune to skew between nodes); zero if it has not seen it change since it
	// started.
	ChangedAt time.Time
}

func (r *Record) lists(node string) bool { return slices.Contains(r.Members, node) }

// Member is a live memberlist member and when it last became live in this speaker's
// view.
type Member struct {
	Name  string
	Since time.Time
}

// Input is one speaker's situation.
type Input struct {
	Self string
	// Members are the live memberlist members, this speaker included.
	Members []Member
	// Lost says when memberlist last lost each speaker that is not live; none for a
	// speaker not heard since this one started.
	Lost map[string]time.Time
	// Records are every speaker's record, this speaker's own included or not.
	Records []Record
	// APIUp says whether this speaker's last write of its own record succeeded, and
	// APIAt is when its last successful write was.
	APIUp bool
	APIAt time.Time
	// RecordsReadAt is when the records were last read straight from the API server.
	RecordsReadAt time.Time
	// LinkDown: the interface memberlist is bound on has no carrier.
	LinkDown bool
	// Restored: this speaker started with the claims its node's previous speaker saved
	// and has announced nothing since. While it rejoins, its mode is ModeRestarting.
	Restored bool
	Now      time.Time
}

// Config holds the rule's timings.
type Config struct {
	// Grace is how long a speaker without majority keeps what it has before it
	// arbitrates through the API server or goes silent.
	Grace time.Duration
	// JoinWait is how long a record written before its writer rejoined this speaker's
	// view may still depose it.
	JoinWait time.Duration
}

// DefaultConfig: Grace covers the difference between two sides noticing a split
// (a few probe intervals) plus the peers' renewals in answer to a Hold record, and
// their round trip; an arbitrating speaker also waits for peers still holding, so
// Grace need not cover the slowest.
// JoinWait covers a peer's re-election and record write after it hears a returning
// node.
func DefaultConfig() Config {
	return Config{Grace: time.Second, JoinWait: 2 * time.Second}
}

// State is what the rule remembers from one decision to the next. The zero State is
// a speaker that has just started: silent since the zero time.
type State struct {
	// Started: the rule ran at least once.
	Started bool
	// TroubleSince is when this speaker last lost its majority; zero while it has one.
	TroubleSince time.Time
	// Silent: the last verdict announced nothing; SilentSince is since when.
	Silent      bool
	SilentSince time.Time
	// JoiningSince is when this speaker left silence while hearing a majority; zero
	// once every announcing peer's record lists it and it hears each of them, or
	// JoinWait later (see Decide). It stays silent meanwhile.
	JoiningSince time.Time
	// HeardSince is when a majority's records began listing this silent speaker while
	// it did not hear that majority yet (a heal reaching its peers first); zero
	// otherwise. It stays silent for at most JoinWait from then.
	HeardSince time.Time
	// QuorumSince is when this speaker's verdicts last began to be Quorum, without a
	// break since; zero when the last verdict was anything else. A majority that
	// leaves it out and appeared after that cannot be one it is coming back to.
	QuorumSince time.Time
}

// Verdict is the decision for one election.
type Verdict struct {
	Mode Mode
	// Electors are the speakers the election runs among (nil when silent).
	Electors []string
	// Take: IPs this speaker does not announce yet may be taken (false in Hold).
	Take bool
	// Expected are the speakers E; Unreachable those of E this speaker does not hear.
	Expected, Unreachable []string
	// Majority: the speakers whose records deposed this one (ModeMinority).
	Majority []string
	// NeedRecords: read the records straight from the API server, then decide again.
	NeedRecords bool
	// DecideAgainAt: the verdict changes then with time alone, unless something else
	// changes first (a deposition waiting out Grace); zero if not.
	DecideAgainAt time.Time
	// Reason says why, in a sentence naming the speakers (for Events and logs).
	Reason string
}

// Decide applies the rule (see the package doc).
func Decide(cfg Config, st State, in Input) (Verdict, State) {
	if !st.Started {
		st = State{Started: true, Silent: true} // silent since the zero time
	}
	live := make([]string, 0, len(in.Members))
	since := make(map[string]time.Time, len(in.Members))
	for _, m := range in.Members {
		live = append(live, m.Name)
		since[m.Name] = m.Since
	}
	if !slices.Contains(live, in.Self) {
		live = append(live, in.Self)
	}
	live = sortedSet(live)

	// Freshness as of now, or as of our last write while we cannot write.
	asOf := in.Now
	if !in.APIUp && !in.APIAt.IsZero() {
		asOf = in.APIAt
	}
	fresh := map[string]*Record{}
	for i := range in.Records {
		r := &in.Records[i]
		if r.freshAt(asOf) {
			fresh[r.Node] = r
		}
	}
	expected := slices.Clone(live)
	for n := range fresh {
		expected = append(expected, n)
	}
	expected = sortedSet(expected)
	v := Verdict{Expected: expected, Unreachable: without(expected, live)}

	f := newFacts(cfg, st, in, live, since, fresh, expected)
	quorate := f.majority(live)
	f.quorate = quorate
	if quorate {
		st.TroubleSince = time.Time{}
	} else if st.TroubleSince.IsZero() {
		st.TroubleSince = in.Now
	}

	// A silent speaker that a majority hears again, before it hears them, is half way
	// back: they serve its IPs until it does. (Only a silent speaker without a majority
	// asks: counting every record's members is the costliest step at a thousand nodes.)
	var heardBy []string
	if st.Silent && !quorate {
		heardBy = f.listeners()
	}
	switch {
	case quorate || !st.Silent || len(heardBy) == 0:
		st.HeardSince = time.Time{}
	case st.HeardSince.IsZero():
		st.HeardSince = in.Now
	}
	deposers, deposeAt := f.deposers()
	v.DecideAgainAt = deposeAt
	switch {
	case in.LinkDown:
		v.Mode = ModeIsolated
		v.Reason = "the interface memberlist runs on has no carrier"
	case len(deposers) > 0:
		v.Mode = ModeMinority
		v.Majority = deposers
		v.Reason = fmt.Sprintf("%s hear a majority of the %d speakers without %s", strings.Join(deposers, ", "), len(expected), in.Self)
	case quorate:
		v.Mode, v.Take = ModeQuorum, true
		v.Electors = sortedSet(append(slices.Clone(live), aliveAndServing(fresh, since, in.Lost)...))
	case !st.HeardSince.IsZero() && in.Now.Sub(st.HeardSince) < cfg.JoinWait:
		v.Mode = ModeRejoining
		v.Reason = fmt.Sprintf("%s hear %s again and it announces nothing until it hears them", strings.Join(heardBy, ", "), in.Self)
	case in.Now.Sub(st.TroubleSince) < cfg.Grace:
		v.Mode, v.Electors = ModeHold, live
		v.Reason = fmt.Sprintf("%s hears %d of %d speakers, no majority", in.Self, len(live), len(expected))
	case !in.APIUp:
		v.Mode = ModeIsolated
		v.Reason = fmt.Sprintf("%s hears %d of %d speakers, no majority, and cannot reach the API server to arbitrate", in.Self, len(live), len(expected))
	default:
		v.Mode = ModeArbitrated
		v.Electors = apiAlive(in.Self, fresh, st.TroubleSince)
		v.Reason = fmt.Sprintf("%s hears %d of %d speakers, no majority: owners are elected among the %d speakers alive in the API server", in.Self, len(live), len(expected), len(v.Electors))
		// A speaker still holding keeps IPs the arbitrated election may give to others:
		// take nothing until it arbitrates too (at most Grace), so it lets go first.
		var holding []string
		for _, n := range v.Electors {
			if r := fresh[n]; n != in.Self && r != nil && r.Mode == ModeHold {
				holding = append(holding, n)
			}
		}
		v.Take = len(holding) == 0
		if !v.Take {
			v.Reason += fmt.Sprintf("; it takes no IP while %s still hold", strings.Join(holding, ", "))
		}
	}

	// Coming back from silence needs records read afresh since it began.
	if st.Silent && !v.Mode.Silent() && v.Mode != ModeHold && !in.RecordsReadAt.After(st.SilentSince) {
		v = Verdict{Mode: ModeRejoining, Expected: v.Expected, Unreachable: v.Unreachable, NeedRecords: true,
			Reason: fmt.Sprintf("%s announced nothing and reads the speakers' records before it announces again", in.Self)}
	}
	// A speaker back from silence stays silent until every announcing peer's record
	// lists it and it hears each of them: the peer that stood in for it releases its
	// IPs once it hears it, and only then republishes; and its own record, which peers
	// read, must not publish a majority without a peer it simply has not heard yet.
	// It also waits to hear each restarting peer: speakers started together (every
	// speaker killed at once) would otherwise elect without one that memberlist has
	// not brought in yet, and take the IPs whose claims it is about to publish.
	// At most JoinWait, for a record that cannot change or a peer that died.
	if v.Mode == ModeQuorum && st.Silent && st.JoiningSince.IsZero() {
		st.JoiningSince = in.Now
	}
	if v.Mode != ModeQuorum {
		st.JoiningSince = time.Time{}
	}
	if !st.JoiningSince.IsZero() {
		var behind, unheard []string
		for n, r := range fresh {
			if n == in.Self || !r.Mode.serving() && r.Mode != ModeRestarting {
				continue
			}
			if r.Mode.serving() && !r.lists(in.Self) {
				behind = append(behind, n)
			}
			if !slices.Contains(live, n) {
				unheard = append(unheard, n)
			}
		}
		if len(behind)+len(unheard) == 0 || in.Now.Sub(st.JoiningSince) >= cfg.JoinWait {
			st.JoiningSince = time.Time{}
		} else {
			v = Verdict{Mode: ModeRejoining, Expected: v.Expected, Unreachable: v.Unreachable, Reason: joiningReason(in.Self, behind, unheard)}
		}
	}
	// Hold keeps what it has: after silence that is nothing, so it stays silent.
	if st.Silent && v.Mode == ModeHold {
		v.Mode, v.Electors, v.Take = ModeRejoining, nil, false
	}
	if in.Restored && v.Mode == ModeRejoining {
		v.Mode = ModeRestarting
	}
	switch {
	case v.Mode != ModeQuorum:
		st.QuorumSince = time.Time{}
	case st.QuorumSince.IsZero():
		st.QuorumSince = in.Now
	}
	switch silent := v.Mode.Silent(); {
	case silent && !st.Silent:
		st.Silent, st.SilentSince = true, in.Now
	case !silent:
		st.Silent = false
	}
	return v, st
}

// joiningReason says what a speaker back from silence waits for.
func joiningReason(self string, behind, unheard []string) string {
	var waits []string
	if len(behind) > 0 {
		slices.Sort(behind)
		waits = append(waits, strings.Join(behind, ", ")+" hear it")
	}
	if len(unheard) > 0 {
		slices.Sort(unheard)
		waits = append(waits, "it hears "+strings.Join(unheard, ", "))
	}
	return fmt.Sprintf("%s is back and announces nothing until %s", self, strings.Join(waits, " and "))
}

// aliveAndServing returns the speakers this one does not hear that are alive and announcing
// all the same: their fresh record changed after memberlist lost them (so they renew
// it), in a mode that announces. They keep their IPs in this speaker's election until
// their record says they stopped (a majority deposed them): an IP is taken from a
// live node only once it has let go. A speaker that died renews nothing and is not
// waited for.
func aliveAndServing(fresh map[string]*Record, heard map[string]time.Time, lost map[string]time.Time) []string {
	var out []string
	for n, r := range fresh {
		if _, ok := heard[n]; ok || r.ChangedAt.IsZero() || !r.ChangedAt.After(lost[n]) {
			continue
		}
		if r.Mode.serving() {
			out = append(out, n)
		}
	}
	return out
}

// apiAlive returns self and the speakers whose fresh record changed after since.
func apiAlive(self string, fresh map[string]*Record, since time.Time) []string {
	out := []string{self}
	for n, r := range fresh {
		if r.ChangedAt.After(since) {
			out = append(out, n)
		}
	}
	return sortedSet(out)
}

func sortedSet(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// countIn counts the distinct names of members that are in set. Records list their
// members sorted, which spares the count a set of its own.
func countIn(set map[string]struct{}, members []string) int {
	n := 0
	if slices.IsSorted(members) {
		for i, m := range members {
			if _, ok := set[m]; ok && (i == 0 || members[i-1] != m) {
				n++
			}
		}
		return n
	}
	seen := make(map[string]struct{}, len(members))
	for _, m := range members {
		if _, ok := set[m]; ok {
			seen[m] = struct{}{}
		}
	}
	return len(seen)
}

func without(a, b []string) []string {
	drop := make(map[string]struct{}, len(b))
	for _, x := range b {
		drop[x] = struct{}{}
	}
	var out []string
	for _, x := range a {
		if _, ok := drop[x]; !ok {
			out = append(out, x)
		}
	}
	return out
}

// freshAt says whether the record was renewed within its duration as of t.
func (r *Record) freshAt(t time.Time) bool { return t.Sub(r.RenewedAt) < r.Duration }
