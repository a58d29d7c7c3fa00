package layer2

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/packet"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// hangGuard bounds every wait on another goroutine so a bug fails the test instead of
// hanging it. It is never a statement about speed.
const hangGuard = 10 * time.Second

// fakeConn is a Conn and NDPConn over channels: the test feeds frames in with deliver
// and reads what the code under test wrote with next.
type fakeConn struct {
	in     chan []byte
	out    chan written
	closed chan struct{}
	once   sync.Once

	mu       sync.Mutex
	groups   []netip.Addr // joined, in order
	joinErr  error
	writeErr error
}

type written struct {
	frame []byte
	dst   net.HardwareAddr
}

func newFakeConn() *fakeConn {
	return &fakeConn{in: make(chan []byte), out: make(chan written, 1024), closed: make(chan struct{})}
}

func (c *fakeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case f := <-c.in:
		return copy(b, f), &packet.Addr{}, nil
	case <-c.closed:
		return 0, nil, net.ErrClosed
	}
}

func (c *fakeConn) WriteTo(b []byte, to net.Addr) (int, error) {
	c.mu.Lock()
	err := c.writeErr
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	pa, ok := to.(*packet.Addr)
	if !ok {
		return 0, errors.New("fake: WriteTo wants a *packet.Addr")
	}
	c.out <- written{frame: slices.Clone(b), dst: slices.Clone(pa.HardwareAddr)}
	return len(b), nil
}

func (c *fakeConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *fakeConn) JoinGroup(g netip.Addr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.joinErr != nil {
		return c.joinErr
	}
	c.groups = append(c.groups, g)
	return nil
}

func (c *fakeConn) LeaveGroup(g netip.Addr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.groups, g)
	if i < 0 {
		return errors.New("fake: not a member")
	}
	c.groups = slices.Delete(c.groups, i, i+1)
	return nil
}

func (c *fakeConn) joined() []netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.groups)
}

// deliver hands one frame to the reader.
func (c *fakeConn) deliver(t *testing.T, frame []byte) {
	t.Helper()
	select {
	case c.in <- frame:
	case <-time.After(hangGuard):
		t.Fatal("nobody reads the fake connection")
	}
}

// next returns the next frame written.
func (c *fakeConn) next(t *testing.T) written {
	t.Helper()
	select {
	case w := <-c.out:
		return w
	case <-time.After(hangGuard):
		t.Fatal("no frame was written")
		return written{}
	}
}

// none checks that nothing has been written so far.
func (c *fakeConn) none(t *testing.T) {
	t.Helper()
	select {
	case w := <-c.out:
		t.Fatalf("unexpected frame written to %s: % x", w.dst, w.frame)
	default:
	}
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c        *fakeClock
	deadline time.Time
	ch       chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, deadline: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	i := slices.Index(t.c.timers, t)
	if i < 0 {
		return false
	}
	t.c.timers = slices.Delete(t.c.timers, i, i+1)
	return true
}

// Advance moves time on and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.deadline.After(c.now) {
			t.ch <- c.now
			continue
		}
		keep = append(keep, t)
	}
	c.timers = keep
}

// waitTimer waits until some goroutine waits on a timer and returns how far ahead of
// now its deadline is.
func (c *fakeClock) waitTimer(t *testing.T) time.Duration {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		if len(c.timers) > 0 {
			d := c.timers[0].deadline.Sub(c.now)
			c.mu.Unlock()
			return d
		}
		c.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no timer was set")
	return 0
}

// pending is the number of timers not yet fired or stopped.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// value reads a counter (testutil would need a module go.sum lacks).
func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
