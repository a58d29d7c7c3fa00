package speaker

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

// Every speaker keeps a record of itself in the API server (speaker/quorum explains
// what for): a Lease named herald-speaker-<node> in herald's namespace, whose
// annotations carry the memberlist members it hears and its mode, written when they
// change; its liveness is a second Lease, its heartbeat (heartbeats.go), renewed like
// a kubelet's node lease. The Node owns both, so deleting the Node deletes them.

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=herald-system

// The record's format is internal/recordformat's, which herald's controller reads too.
const (
	// RecordLabel marks the speakers' records (and only them) among the Leases.
	RecordLabel = recordformat.Label
	// RecordMembersAnnotation lists the memberlist members the speaker hears.
	RecordMembersAnnotation = recordformat.MembersAnnotation
	// RecordModeAnnotation is the speaker's quorum.Mode.
	RecordModeAnnotation = recordformat.ModeAnnotation
	// RecordUnreachableAnnotation lists the expected speakers it does not hear.
	RecordUnreachableAnnotation = recordformat.UnreachableAnnotation
	// RecordMACsAnnotation lists the MACs its ARP/NDP responders answer with: another
	// speaker seeing one of them answer for its IP knows it is a peer, not a foreign
	// device.
	RecordMACsAnnotation = recordformat.MACsAnnotation
)

// RecordName is the name of node's record.
func RecordName(node string) string { return recordformat.Name(node) }

// RecordConfig says how records are renewed.
type RecordConfig struct {
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

// DefaultRecordConfig renews the heartbeat every 10 s, a kubelet node lease's pace,
// with records fresh for 30 s, retries a failed write twice a second, and reads the
// heartbeat summary from 8 unheard peers (heartbeats.go says why 8). Renewals are
// far from the failover path: a change of view or mode is written at once, and so is
// the record when a peer starts asking whether this speaker is alive (quorum.AskedBy),
// except that changes of view and new askers within 250 ms of the last write wait
// for those 250 ms to end and go in one write. At a split memberlist loses the other
// side's peers, and they start asking, in batches over a second or so; each batch
// cost a write that reached every speaker out of Quorum (writes by reason at a
// 30-node split: 60 of mode, 121 of view, 84 answers). A quarter of Grace (1 s)
// leaves an answer time to reach an asker before it arbitrates.
func DefaultRecordConfig() RecordConfig {
	return RecordConfig{Renew: 10 * time.Second, FastRenew: 500 * time.Millisecond, Duration: 30 * time.Second, SummaryFrom: 8,
		Coalesce: 250 * time.Millisecond, DigestFrom: 32}
}

func (c RecordConfig) validate() error {
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
	if l.Labels[RecordLabel] == "" || l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return quorum.Record{}, false
	}
	r := quorum.Record{
		Node:      *l.Spec.HolderIdentity,
		Mode:      quorum.Mode(l.Annotations[RecordModeAnnotation]),
		RenewedAt: l.Spec.RenewTime.Time,
		Duration:  time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second,
		ChangedAt: changedAt,
	}
	r.Members = splitList(l.Annotations[RecordMembersAnnotation])
	r.Unreachable = splitList(l.Annotations[RecordUnreachableAnnotation])
	return r, true
}

// splitList reads a comma-separated annotation; empty is none.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// recordWish is what this speaker wants its record to say.
type recordWish struct {
	members, unreachable, macs []string
	mode                       quorum.Mode
	// misses are the speakers known to this one that it does not hear (missed): its
	// record's labels, which the annotations do not repeat.
	misses []string
	// askers are the peers asking whether this speaker is alive (quorum.AskedBy): a
	// new one gets a renewal at once. Not written: the renewal is the answer.
	askers []string
}

// content is what the record says, as the annotations write sets; renewalOnly compares
// the same keys (recordContentKeys).
func (w recordWish) content() map[string]string {
	return map[string]string{
		RecordMembersAnnotation:     strings.Join(w.members, ","),
		RecordModeAnnotation:        string(w.mode),
		RecordUnreachableAnnotation: strings.Join(w.unreachable, ","),
		RecordMACsAnnotation:        strings.Join(w.macs, ","),
	}
}

// recordContentKeys are the annotations that make up a record's content.
var recordContentKeys = slices.Sorted(maps.Keys(recordWish{}.content()))

// sameContent says whether w and o make the record say the same.
func (w recordWish) sameContent(o recordWish) bool {
	return w.mode == o.mode && slices.Equal(w.members, o.members) && slices.Equal(w.unreachable, o.unreachable) &&
		slices.Equal(w.macs, o.macs) && slices.Equal(w.misses, o.misses)
}

// newAsker says whether w has an asker that o has not.
func (w recordWish) newAsker(o recordWish) bool {
	for _, a := range w.askers {
		if !slices.Contains(o.askers, a) {
			return true
		}
	}
	return false
}
