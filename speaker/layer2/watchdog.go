package layer2

import (
	"context"
	"sync/atomic"
	"time"
)

// A speaker that stops running for a while (SIGSTOP, a frozen cgroup such as `docker
// pause`, a paused or migrating VM, a machine starved of CPU) comes back believing what
// it believed before: that it owns the IPs it announced. Meanwhile its peers may have
// declared it dead and given those IPs to other nodes, and its sockets hold the ARP and
// NDP requests that arrived while it stood still. Answering either puts a second MAC on
// the wire for an IP, and the clients that hear the stale answer last send their
// traffic to the wrong node.
//
// So the announcer keeps a heartbeat. While the heartbeat is late (the process has not
// run), and after a stall until the speaker has heard its peers again and says so
// (Announcer.Resume), every owned IP is treated as quiet: requests for it are not
// answered, and no gratuitous frame goes out for it. Claims are still seen.

// DefaultStallAfter is how late the heartbeat may be before the announcer counts a
// stall: well above the scheduling delays of a busy machine, and below the earliest
// moment memberlist's peers may declare a silent speaker dead and take its IPs over
// (500 ms with the speaker's defaults: one 100 ms probe, 400 ms of suspicion; the
// speaker refuses a --stall-after that is not below it).
const DefaultStallAfter = 400 * time.Millisecond

// heartbeatEvery is how often the watchdog beats; a stall is noticed at most this
// long after it ended.
const heartbeatEvery = 50 * time.Millisecond

// watchdog tells the responders and the takeover loops whether this process has run
// without a stall, and, after a stall, until Resume.
type watchdog struct {
	clock   clock
	after   time.Duration
	start   time.Time
	beat    atomic.Int64 // since start, of the last beat
	stalled atomic.Bool  // a stall was noticed and Resume has not been called since
	running atomic.Bool  // run has recorded its first beat
	onStall func(time.Duration)
}

// newWatchdog returns a watchdog that counts a stall when its heartbeat is more than
// after late (never if after is 0) and then calls onStall (which may be nil).
func newWatchdog(clk clock, after time.Duration, onStall func(time.Duration)) *watchdog {
	return &watchdog{clock: clk, after: after, start: clk.Now(), onStall: onStall}
}

// awake reports whether the process has run without a stall: the last beat is recent
// and no stall awaits Resume. The beat is read before the stall flag: the heartbeat
// raises the flag before it records the beat that ends a stall, so a caller that sees
// that fresh beat also sees the flag.
func (w *watchdog) awake() bool {
	if w == nil || w.after <= 0 || !w.running.Load() {
		return true
	}
	last := time.Duration(w.beat.Load())
	if w.clock.Now().Sub(w.start)-last > w.after {
		return false
	}
	return !w.stalled.Load()
}

// run beats every heartbeatEvery until ctx ends; a beat later than after since the
// previous one is a stall: it raises the flag and calls onStall with the gap.
func (w *watchdog) run(ctx context.Context) {
	if w.after <= 0 {
		return
	}
	w.beat.Store(int64(w.clock.Now().Sub(w.start)))
	w.running.Store(true)
	defer w.running.Store(false)
	for {
		tm := w.clock.NewTimer(heartbeatEvery)
		select {
		case <-ctx.Done():
			tm.Stop()
			return
		case <-tm.C():
		}
		now := w.clock.Now().Sub(w.start)
		gap := now - time.Duration(w.beat.Load())
		if gap > w.after {
			w.stalled.Store(true)
		}
		w.beat.Store(int64(now))
		if gap > w.after && w.onStall != nil {
			w.onStall(gap)
		}
	}
}

// resume ends a stall; it reports whether there was one.
func (w *watchdog) resume() bool {
	if w == nil {
		return false
	}
	return w.stalled.Swap(false)
}
