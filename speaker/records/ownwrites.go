package records

import (
	"slices"
	"strconv"
	"time"
)

// ownWritesKept is how many of its own latest writes a speaker remembers
// (writtenBefore).
const ownWritesKept = 32

// ownWrite is one of this speaker's writes (record or heartbeat): the etcd revision it
// got, and when.
type ownWrite struct {
	rev uint64
	at  time.Time
}

// noteOwnWrite remembers a write of this speaker's.
func (r *Keeper) noteOwnWrite(resourceVersion string, at time.Time) {
	rev, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return
	}
	r.own = append(r.own, ownWrite{rev: rev, at: at})
	if len(r.own) > ownWritesKept {
		r.own = slices.Delete(r.own, 0, len(r.own)-ownWritesKept)
	}
}

// writtenBefore returns when this speaker made the latest of its remembered writes
// that precedes resourceVersion, zero if none: a version with a higher etcd revision
// was written after it, whenever this speaker read it. That is how a version it did
// not see changing (read from a list) still tells a peer's answer to a record this
// speaker wrote (quorum.AskedBy) from what the peer wrote before. Under mu.
func (r *Keeper) writtenBefore(resourceVersion string) time.Time {
	rev, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil || rev == 0 {
		return time.Time{}
	}
	return r.writtenUpToLocked(rev - 1)
}

// writtenUpTo returns when this speaker made the latest of its remembered writes
// whose etcd revision is rev or lower, zero if none: what holds every record as of
// revision rev holds them as they stood after that write was made.
func (r *Keeper) writtenUpTo(rev uint64) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writtenUpToLocked(rev)
}

func (r *Keeper) writtenUpToLocked(rev uint64) time.Time {
	for i := len(r.own) - 1; i >= 0; i-- {
		if r.own[i].rev <= rev {
			return r.own[i].at
		}
	}
	return time.Time{}
}
