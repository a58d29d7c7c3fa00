package deadnodes

import (
	"cmp"
	"slices"
	"time"
)

// Renewal is what this speaker knows of the renewals of another speaker's record in
// the API server.
type Renewal struct {
	// RenewedAt is the writer's last renewal and Duration how long it stays fresh.
	RenewedAt time.Time
	Duration  time.Duration
	// ChangedAt is when this speaker last saw the record change, by its own clock;
	// zero if not since it started.
	ChangedAt time.Time
}

// Input is one speaker's knowledge.
type Input struct {
	Self string
	// Quorum: this speaker hears a majority of the speakers (quorum.ModeQuorum).
	Quorum bool
	// Live are the live memberlist members.
	Live []string
	// Lost says when memberlist last lost each member that is not live.
	Lost map[string]time.Time
	// Left are the members that said they were leaving before they went.
	Left map[string]bool
	// Records are the speakers' records by node.
	Records map[string]Renewal
	// AliveAt is, per node, when a probe of its address last got an answer, and
	// SilentAt when a probe sent then last went unanswered for the probe timeout.
	AliveAt, SilentAt map[string]time.Time
	// Nodes are the names of the Node objects.
	Nodes []string
	Now   time.Time
}

// Config holds the rule's timings.
type Config struct {
	// AliveFor is how long a probe's answer proves a node alive.
	AliveFor time.Duration
}

// DefaultConfig lets an answer count for several probe periods (the speaker probes
// twice a second), so one slow answer does not withhold a live node.
func DefaultConfig() Config { return Config{AliveFor: 5 * time.Second} }

// Node is a node whose endpoints are withheld.
type Node struct {
	Name string
	// Since is when this speaker lost it (for a node already dead when it started,
	// when its record expired).
	Since time.Time
	// Unreachable: a probe sent since then went unanswered.
	Unreachable bool
	// Left: its speaker said goodbye (it is withheld only once unreachable).
	Left bool
}

// Decide returns the withheld nodes, sorted by name (see the package doc).
func Decide(cfg Config, in Input) []Node {
	var out []Node
	for _, c := range candidates(in) {
		if at, ok := in.AliveAt[c.Name]; ok && at.After(c.Since) && in.Now.Sub(at) < cfg.AliveFor {
			continue
		}
		silent, ok := in.SilentAt[c.Name]
		unreachable := ok && !silent.Before(c.Since)
		if in.Left[c.Name] && !unreachable {
			// It said goodbye: only a host that then stopped answering is down.
			continue
		}
		out = append(out, Node{Name: c.Name, Since: c.Since, Unreachable: unreachable, Left: in.Left[c.Name]})
	}
	return out
}

// Suspects are the nodes worth probing: those Decide would withhold if every probe
// went unanswered. A speaker probes them and feeds the answers back as AliveAt and
// SilentAt.
func Suspects(in Input) []string {
	var out []string
	for _, c := range candidates(in) {
		out = append(out, c.Name)
	}
	return out
}

// candidates are the nodes the rule withholds unless a probe shows them alive, or, for
// those that said goodbye, until a probe shows them down; sorted by name, each with
// the moment it was lost.
func candidates(in Input) []Node {
	if !in.Quorum {
		return nil
	}
	live := make(map[string]bool, len(in.Live))
	for _, n := range in.Live {
		live[n] = true
	}
	var out []Node
	for _, n := range in.Nodes {
		if n == in.Self || live[n] {
			continue
		}
		rec, hasRecord := in.Records[n]
		since, lost := in.Lost[n]
		switch {
		case lost:
		case hasRecord && !in.Now.Before(rec.RenewedAt.Add(rec.Duration)):
			since = rec.RenewedAt.Add(rec.Duration)
		default:
			continue // never a speaker, or one this speaker has not seen die
		}
		if hasRecord && rec.ChangedAt.After(since) {
			continue // it renews its record: cut off from memberlist, not dead
		}
		out = append(out, Node{Name: n, Since: since})
	}
	slices.SortFunc(out, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
