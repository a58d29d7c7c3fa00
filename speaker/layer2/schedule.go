package layer2

import (
	"fmt"
	"time"
)

// Schedule says when the gratuitous frames of a takeover go out (gratuitous ARP in
// request and reply form for IPv4, an unsolicited neighbour advertisement for IPv6, on
// every interface the IP may be announced on).
//
// The first announcement goes out at once. Repeats are offsets from the takeover at
// which it is sent again; then, for as long as the node owns the IP, it is sent every
// Refresh (0 = no refresh).
type Schedule struct {
	Repeats []time.Duration
	Refresh time.Duration
}

// DefaultSchedule is: at once, then at +1.1 s, +2.2 s, +3.3 s and +4.4 s, then every
// 60 s.
//
//   - 1.1 s spacing: Linux ignores an ARP reply that would change an entry updated less
//     than locktime (1 s by default) ago, so a first announcement that races the old
//     owner's last answer may be lost; the one at +1.1 s is past that window. Repeats
//     also cover frame loss. Five announcements over 4.4 s is MetalLB's proven pattern
//     (https://github.com/metallb/metallb/issues/172).
//   - Refresh 60 s: keeps switch FDB entries (300 s ageing by default) and router caches
//     pointing at this node on interfaces that carry little other traffic, and repairs
//     caches after a partition heals (https://github.com/metallb/metallb/issues/584, https://github.com/metallb/metallb/issues/1761, https://github.com/metallb/metallb/issues/2910). One refresh costs 2
//     broadcast frames per IPv4 VIP per interface (1 per IPv6 VIP); at 1,000 VIPs that
//     is about 33 frames/s on the LAN.
func DefaultSchedule() Schedule {
	return Schedule{
		Repeats: []time.Duration{1100 * time.Millisecond, 2200 * time.Millisecond, 3300 * time.Millisecond, 4400 * time.Millisecond},
		Refresh: 60 * time.Second,
	}
}

// Validate checks that repeats are positive and ascending and Refresh is not negative.
func (s Schedule) Validate() error {
	var last time.Duration
	for i, d := range s.Repeats {
		if d <= last {
			return fmt.Errorf("layer2: schedule repeat %d (%s) must be positive and after the previous one (%s)", i, d, last)
		}
		last = d
	}
	if s.Refresh < 0 {
		return fmt.Errorf("layer2: schedule refresh %s is negative", s.Refresh)
	}
	return nil
}

// clock is time as the announcer sees it; tests substitute a fake one.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) timer
}

type timer interface {
	C() <-chan time.Time
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }
