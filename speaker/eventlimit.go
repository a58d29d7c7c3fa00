package speaker

import (
	"net/netip"
	"sync"
	"time"
)

// conflictEventEvery is how often at most one IP's conflict writes an Event of each
// reason: a device, or a forger, that claims and drops an IP over and over would
// otherwise write two Events per cycle on every Service holding it.
const conflictEventEvery = time.Minute

// eventLimit lets one Event per IP and reason through per interval; those held back
// are counted and the count goes with the next one let through.
type eventLimit struct {
	every time.Duration

	mu    sync.Mutex
	slots map[eventKey]eventSlot
}

type eventKey struct {
	ip     netip.Addr
	reason string
}

type eventSlot struct {
	at         time.Time // when the last Event went out
	suppressed int       // held back since
}

func newEventLimit(every time.Duration) *eventLimit {
	return &eventLimit{every: every, slots: map[eventKey]eventSlot{}}
}

// allow says whether an Event of reason about ip may go out at now, and if so how many
// were held back since the last one.
func (l *eventLimit) allow(ip netip.Addr, reason string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := eventKey{ip, reason}
	s, seen := l.slots[k]
	if seen && now.Sub(s.at) < l.every {
		s.suppressed++
		l.slots[k] = s
		return false, 0
	}
	l.slots[k] = eventSlot{at: now}
	for other, o := range l.slots {
		// Slots past their interval with nothing held back say nothing more.
		if now.Sub(o.at) >= l.every && o.suppressed == 0 && other != k {
			delete(l.slots, other)
		}
	}
	return true, s.suppressed
}
