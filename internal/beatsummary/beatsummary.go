// Package beatsummary is the format of the heartbeat summary: one Lease, written by
// herald's controller, that says which speakers' heartbeats are fresh. A speaker that
// cannot hear some peers over memberlist needs to know whether they still reach the
// API server; reading their heartbeats one by one costs a watch event per heartbeat
// renewal and per reader, N²/20 a second during an even split of N speakers. The
// summary changes only when a heartbeat turns fresh or stale, and is renewed every
// Renew so that its readers can tell it is current: N/10 events a second to all its
// readers together, whatever the split, besides the writer's own watch of the
// heartbeats (N/10).
//
// The package lives below both the controller and the speaker so that neither depends
// on the other to write what the other reads. It is pure: no client, no clock.
package beatsummary

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	// Name is the summary's Lease in herald's namespace.
	Name = "herald-heartbeats"
	// Holder is its holder identity.
	Holder = "herald-controller"
	// HeartbeatLabel marks the speakers' heartbeats among the Leases.
	HeartbeatLabel = "herald.dev/speaker-heartbeat"
	// FreshAnnotation lists the speakers whose heartbeat was renewed within its
	// duration when the summary was written.
	FreshAnnotation = "herald.dev/fresh"
	// StaleAnnotation lists the others, each as node=time of its last renewal.
	StaleAnnotation = "herald.dev/stale"

	// Renew is how often the controller rewrites the summary when nothing changes.
	Renew = 10 * time.Second
	// Duration is how long after its last write a reader trusts the summary: two
	// renewals missed and a margin. A stale summary is not read; readers fall back to
	// the heartbeats themselves.
	Duration = 25 * time.Second
)

// HeartbeatName is the name of node's heartbeat.
func HeartbeatName(node string) string { return "herald-heartbeat-" + node }

// Beat is one speaker's heartbeat as the API server holds it.
type Beat struct {
	Node      string
	RenewedAt time.Time
	// Duration is how long the heartbeat stays fresh after its renewal (the
	// speaker's record duration, the Lease's leaseDurationSeconds).
	Duration time.Duration
}

// Summary says which heartbeats were fresh at At.
type Summary struct {
	// At is when it was written, by the writer's clock.
	At time.Time
	// Duration is how long after At it may be trusted.
	Duration time.Duration
	// Fresh are the speakers whose heartbeat was fresh at At, sorted.
	Fresh []string
	// Stale are the others, with the time of their last renewal.
	Stale map[string]time.Time
}

// Summarize sorts beats into fresh and stale at now. next is when the first fresh one
// turns stale if it is not renewed (zero if none is fresh): the writer's next look.
// A heartbeat never renewed counts as stale, at the zero time.
func Summarize(beats []Beat, now time.Time) (fresh []string, stale map[string]time.Time, next time.Time) {
	stale = map[string]time.Time{}
	for _, b := range beats {
		until := b.RenewedAt.Add(b.Duration)
		if b.RenewedAt.IsZero() || !until.After(now) {
			stale[b.Node] = b.RenewedAt
			continue
		}
		fresh = append(fresh, b.Node)
		if next.IsZero() || until.Before(next) {
			next = until
		}
	}
	slices.Sort(fresh)
	return slices.Compact(fresh), stale, next
}

// SameSets says whether s and o list the same fresh and stale speakers with the same
// renewals: only then may a writer skip a write until the summary's renewal is due.
func (s Summary) SameSets(o Summary) bool {
	return slices.Equal(s.Fresh, o.Fresh) && maps.EqualFunc(s.Stale, o.Stale, time.Time.Equal)
}

// Usable says whether s may be trusted at now: written, and within its duration.
func (s Summary) Usable(now time.Time) bool {
	return !s.At.IsZero() && now.Before(s.At.Add(s.Duration))
}

// Beat returns when node's heartbeat was renewed as far as s tells: a fresh one as of
// At (it was renewed within its duration before then, and At is the latest a reader
// can vouch for), a stale one at its last renewal, and the zero time for a speaker s
// does not list (it has no heartbeat).
func (s Summary) Beat(node string) time.Time {
	if _, ok := slices.BinarySearch(s.Fresh, node); ok {
		return s.At
	}
	return s.Stale[node]
}

// Apply writes s into l: its holder, renewal, duration and annotations.
func (s Summary) Apply(l *coordinationv1.Lease) {
	l.Spec.HolderIdentity = ptr.To(Holder)
	l.Spec.RenewTime = &metav1.MicroTime{Time: s.At}
	l.Spec.LeaseDurationSeconds = ptr.To(int32(s.Duration / time.Second))
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[FreshAnnotation] = strings.Join(s.Fresh, ",")
	stale := make([]string, 0, len(s.Stale))
	for _, node := range slices.Sorted(maps.Keys(s.Stale)) {
		stale = append(stale, node+"="+s.Stale[node].UTC().Format(time.RFC3339Nano))
	}
	l.Annotations[StaleAnnotation] = strings.Join(stale, ",")
}

// FromLease reads a summary from its Lease.
func FromLease(l *coordinationv1.Lease) (Summary, error) {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return Summary{}, fmt.Errorf("heartbeat summary %s/%s: spec.renewTime and spec.leaseDurationSeconds must be set", l.Namespace, l.Name)
	}
	s := Summary{
		At:       l.Spec.RenewTime.Time,
		Duration: time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second,
		Stale:    map[string]time.Time{},
	}
	if v := l.Annotations[FreshAnnotation]; v != "" {
		s.Fresh = strings.Split(v, ",")
		if !strictlySorted(s.Fresh) || s.Fresh[0] == "" {
			return Summary{}, fmt.Errorf("heartbeat summary %s/%s: annotation %s is not a sorted list of distinct node names", l.Namespace, l.Name, FreshAnnotation)
		}
	}
	if v := l.Annotations[StaleAnnotation]; v != "" {
		for entry := range strings.SplitSeq(v, ",") {
			node, at, ok := strings.Cut(entry, "=")
			t, err := time.Parse(time.RFC3339Nano, at)
			if !ok || node == "" || err != nil || t.Before(time.Time{}) {
				return Summary{}, fmt.Errorf("heartbeat summary %s/%s: annotation %s: entry %q is not node=RFC 3339 time", l.Namespace, l.Name, StaleAnnotation, entry)
			}
			_, twice := s.Stale[node]
			_, fresh := slices.BinarySearch(s.Fresh, node)
			if twice || fresh {
				return Summary{}, fmt.Errorf("heartbeat summary %s/%s: node %q is listed twice", l.Namespace, l.Name, node)
			}
			s.Stale[node] = t
		}
	}
	return s, nil
}

// strictlySorted says whether names are sorted with none twice.
func strictlySorted(names []string) bool {
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			return false
		}
	}
	return true
}
