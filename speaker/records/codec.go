package records

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/speaker/quorum"
)

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=herald-system

// The record's format is internal/recordformat's, which herald's controller reads too.
const (
	// Label marks the speakers' records (and only them) among the Leases.
	Label = recordformat.Label
	// MembersAnnotation lists the memberlist members the speaker hears.
	MembersAnnotation = recordformat.MembersAnnotation
	// ModeAnnotation is the speaker's quorum.Mode.
	ModeAnnotation = recordformat.ModeAnnotation
	// UnreachableAnnotation lists the expected speakers it does not hear.
	UnreachableAnnotation = recordformat.UnreachableAnnotation
	// MACsAnnotation lists the MACs its ARP/NDP responders answer with: another
	// speaker seeing one of them answer for its IP knows it is a peer, not a foreign
	// device.
	MACsAnnotation = recordformat.MACsAnnotation
)

// Name is the name of node's record.
func Name(node string) string { return recordformat.Name(node) }

// Config says how records are renewed.
type Config struct {
	// Renew is the period of the heartbeat's renewals.
	Renew time.Duration
	// FastRenew is the period of retries after a failed write.
	FastRenew time.Duration
	// Duration is how long a record stays fresh after it or its heartbeat was last
	// written: the longest a dead speaker keeps counting among the expected ones.
	Duration time.Duration
	// SummaryFrom is how many peers a speaker must not hear before it reads the
	// controller's heartbeat summary instead of their heartbeats (0: never).
	SummaryFrom int
	// Coalesce is how long after a write of the record a change of its view, or a
	// new peer asking, waits to be written with whatever else changes meanwhile
	// (0: each at once). A change of mode, or one after a quiet spell, is written at
	// once.
	Coalesce time.Duration
	// DigestFrom is how many records the controller's records digest must list for
	// a speaker out of Quorum to read it instead of every record (0: never).
	DigestFrom int
}

// DefaultConfig renews the heartbeat at a kubelet node lease's pace, with records
// fresh for three renewals, and reads the heartbeat summary from a few unheard peers,
// where it starts to cost fewer events than their heartbeats. Renewals are far from
// the failover path: a change of view or mode is written at once, and so is the record
// when a peer starts asking whether this speaker is alive (quorum.AskedBy), except
// that changes of view and new askers shortly after the last write go in one write
// (see the package doc). That window, a quarter of the quorum's Grace, leaves an
// answer time to reach an asker before it arbitrates.
func DefaultConfig() Config {
	return Config{Renew: 10 * time.Second, FastRenew: 500 * time.Millisecond, Duration: 30 * time.Second, SummaryFrom: 8,
		Coalesce: 250 * time.Millisecond, DigestFrom: 32}
}

// Validate says what is wrong with c, nil if nothing.
func (c Config) Validate() error {
	switch {
	case c.Renew <= 0 || c.FastRenew <= 0 || c.Duration <= 0:
		return fmt.Errorf("record timings must be positive (renew %v, fast renew %v, duration %v)", c.Renew, c.FastRenew, c.Duration)
	case c.Duration < c.Renew*2:
		return fmt.Errorf("--record-duration %v must be at least twice --record-renew-interval %v", c.Duration, c.Renew)
	case c.Duration < time.Second:
		return fmt.Errorf("--record-duration %v must be at least 1s (Leases count whole seconds)", c.Duration)
	case c.SummaryFrom < 0:
		return fmt.Errorf("--heartbeat-summary-from %d must be 0 (never) or more", c.SummaryFrom)
	case c.Coalesce < 0:
		return fmt.Errorf("--record-coalesce %v must not be negative (0: write each change at once)", c.Coalesce)
	case c.DigestFrom < 0:
		return fmt.Errorf("--records-digest-from %d must be 0 (never) or more", c.DigestFrom)
	}
	return nil
}

// recordFromLease reads a speaker's record; ok is false for a Lease that is not one.
func recordFromLease(l *coordinationv1.Lease, changedAt time.Time) (quorum.Record, bool) {
	if l.Labels[Label] == "" || l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return quorum.Record{}, false
	}
	r := quorum.Record{
		Node:      *l.Spec.HolderIdentity,
		Mode:      quorum.Mode(l.Annotations[ModeAnnotation]),
		RenewedAt: l.Spec.RenewTime.Time,
		Duration:  time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second,
		ChangedAt: changedAt,
	}
	r.Members = SplitList(l.Annotations[MembersAnnotation])
	r.Unreachable = SplitList(l.Annotations[UnreachableAnnotation])
	return r, true
}

// SplitList reads a comma-separated list as records carry them (the MACs go the
// same way in memberlist metadata); empty is none.
func SplitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// Wish is what this speaker wants its record to say.
type Wish struct {
	// Members are the memberlist members it hears, Unreachable the expected speakers
	// it does not, MACs those its responders answer with: its annotations.
	Members, Unreachable, MACs []string
	Mode                       quorum.Mode
	// Misses are the speakers known to this one that it does not hear (Misses): its
	// record's labels, which the annotations do not repeat.
	Misses []string
	// Askers are the peers asking whether this speaker is alive (quorum.AskedBy): a
	// new one gets a renewal at once. Not written: the renewal is the answer.
	Askers []string
}

// content is what the record says, as the annotations write sets; renewalOnly compares
// the same keys (recordContentKeys).
func (w Wish) content() map[string]string {
	return map[string]string{
		MembersAnnotation:     strings.Join(w.Members, ","),
		ModeAnnotation:        string(w.Mode),
		UnreachableAnnotation: strings.Join(w.Unreachable, ","),
		MACsAnnotation:        strings.Join(w.MACs, ","),
	}
}

// recordContentKeys are the annotations that make up a record's content.
var recordContentKeys = slices.Sorted(maps.Keys(Wish{}.content()))

// sameContent says whether w and o make the record say the same.
func (w Wish) sameContent(o Wish) bool {
	return w.Mode == o.Mode && slices.Equal(w.Members, o.Members) && slices.Equal(w.Unreachable, o.Unreachable) &&
		slices.Equal(w.MACs, o.MACs) && slices.Equal(w.Misses, o.Misses)
}

// newAsker says whether w has an asker that o has not.
func (w Wish) newAsker(o Wish) bool {
	for _, a := range w.Askers {
		if !slices.Contains(o.Askers, a) {
			return true
		}
	}
	return false
}
