package layer2

import (
	"net"
	"sync"
	"time"
)

// Default limits of the ARP and NDP answers per requester, on each interface. A host
// resolves a VIP once per cache lifetime, a router refreshing a thousand VIPs at once
// asks in one burst, and a monitor may ask for a few VIPs a hundred times a second;
// more than that is a host asking on purpose, and every answer goes to the MAC the
// request names.
const (
	// DefaultReplyRate is how many answers per second one requester gets, sustained.
	DefaultReplyRate = 1000
	// DefaultReplyBurst is how many answers one requester may get at once.
	DefaultReplyBurst = 1000
	// replyRequesters bounds the requesters tracked per interface; past it, the new
	// ones share one bucket, so a flood of made-up MACs costs memory once and leaves
	// the known requesters their own.
	replyRequesters = 4096
)

// replyLimit is a token bucket per requester MAC, in a map of bounded size.
type replyLimit struct {
	rate  float64 // tokens per second
	burst float64
	max   int // buckets kept, besides the shared one

	mu      sync.Mutex
	buckets map[[6]byte]bucket
	shared  bucket // for requesters that found the map full
	pruned  time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newReplyLimit(rate, burst float64, max int) *replyLimit {
	return &replyLimit{rate: rate, burst: burst, max: max, buckets: map[[6]byte]bucket{}}
}

// take spends one token of b at now if it has one.
func (l *replyLimit) take(b *bucket, now time.Time) bool {
	if b.at.IsZero() {
		b.tokens = l.burst
	} else if d := now.Sub(b.at); d > 0 {
		b.tokens = min(l.burst, b.tokens+d.Seconds()*l.rate)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// allow says whether an answer to mac may go out at now, and spends a token if so.
func (l *replyLimit) allow(mac net.HardwareAddr, now time.Time) bool {
	if len(mac) != 6 {
		return false
	}
	k := [6]byte(mac)
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[k]
	if !ok && len(l.buckets) >= l.max {
		l.prune(now)
	}
	if !ok && len(l.buckets) >= l.max {
		return l.take(&l.shared, now)
	}
	allowed := l.take(&b, now)
	l.buckets[k] = b
	return allowed
}

// prune drops the buckets that have refilled (their requesters would start full
// anyway), at most once a second so that a flood of new MACs does not scan the map
// for every frame.
func (l *replyLimit) prune(now time.Time) {
	if now.Sub(l.pruned) < time.Second {
		return
	}
	l.pruned = now
	full := time.Duration(l.burst / l.rate * float64(time.Second))
	for k, b := range l.buckets {
		if now.Sub(b.at) >= full {
			delete(l.buckets, k)
		}
	}
}
