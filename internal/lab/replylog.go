package lab

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// NeighbourWatch is what a test reads of an ARPWatch or an NDPWatch: the address asked
// for and the MACs that answered.
type NeighbourWatch interface {
	IP() netip.Addr
	MACsSince(t time.Time) []string
	FirstFrom(mac string, t time.Time) (time.Time, bool)
	Settle(window, limit time.Duration, except ...string) (string, error)
	Close()
}

// WatchNeighbour watches who answers for ip from the namespace ns: by NDP for an IPv6
// address (WatchNDP), by ARP otherwise (WatchARP).
func WatchNeighbour(ns string, ip netip.Addr, interval time.Duration) (NeighbourWatch, error) {
	if ip.Is6() && !ip.Is4In6() {
		return WatchNDP(ns, ip, interval)
	}
	return WatchARP(ns, ip, interval)
}

// watchLoops are a watch's two goroutines: one asking every interval, one reading
// (each read waits at most a short deadline, so that Close is noticed), until Close.
// ARPWatch and NDPWatch embed them.
type watchLoops struct {
	stop chan struct{}
	done sync.WaitGroup
}

func (l *watchLoops) start(interval time.Duration, ask, read func()) {
	l.stop = make(chan struct{})
	l.done.Add(2)
	go func() {
		defer l.done.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			ask() // a lost question is the next tick's to make up
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
		}
	}()
	go func() {
		defer l.done.Done()
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			read()
		}
	}()
}

// shut stops both loops and then closes the socket; calling it again is harmless.
func (l *watchLoops) shut(closeSocket func() error) {
	select {
	case <-l.stop:
		return
	default:
	}
	close(l.stop)
	l.done.Wait()
	_ = closeSocket()
}

// replyLog is what a watch heard: which MAC answered for ip, and when. ARPWatch and
// NDPWatch embed it.
type replyLog struct {
	ip netip.Addr

	mu      sync.Mutex
	replies []ARPReply
}

func (l *replyLog) record(mac string, at time.Time) {
	l.mu.Lock()
	l.replies = append(l.replies, ARPReply{MAC: mac, At: at})
	l.mu.Unlock()
}

// IP is the address asked for.
func (l *replyLog) IP() netip.Addr { return l.ip }

// MACsSince returns the distinct MACs that answered after t, sorted.
func (l *replyLog) MACsSince(t time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.replies {
		if r.At.After(t) && !slices.Contains(out, r.MAC) {
			out = append(out, r.MAC)
		}
	}
	slices.Sort(out)
	return out
}

// FirstFrom returns when mac first answered after t.
func (l *replyLog) FirstFrom(mac string, t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.replies {
		if r.At.After(t) && r.MAC == mac {
			return r.At, true
		}
	}
	return time.Time{}, false
}

// LastFrom returns when mac last answered after t.
func (l *replyLog) LastFrom(mac string, t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.replies) - 1; i >= 0; i-- {
		if r := l.replies[i]; r.At.After(t) && r.MAC == mac {
			return r.At, true
		}
	}
	return time.Time{}, false
}

// Settle waits until exactly one MAC answers over a whole window, other than any of
// except, and returns it; it gives up after limit.
func (l *replyLog) Settle(window, limit time.Duration, except ...string) (string, error) {
	deadline := time.Now().Add(limit)
	var macs []string
	for time.Now().Before(deadline) {
		start := time.Now()
		time.Sleep(window)
		macs = l.MACsSince(start)
		if len(macs) == 1 && !slices.Contains(except, macs[0]) {
			return macs[0], nil
		}
	}
	return "", fmt.Errorf("after %v the MACs answering for %s over the last %v were %v, want exactly one (not %v)", limit, l.ip, window, macs, except)
}
