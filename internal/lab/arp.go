package lab

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/arp"

	"herald.dev/herald/internal/netns"
)

// ARPWatch asks who has an IP from a host's eth0 every interval and records every
// reply: which MAC answered and when. It is how a machine on the LAN sees a VIP move,
// without depending on the arping command.
type ARPWatch struct {
	c  *arp.Client
	ip netip.Addr

	mu       sync.Mutex
	requests []time.Time // when each request went out
	replies  []ARPReply
	stop     chan struct{}
	done     sync.WaitGroup
}

// ARPReply is one reply the watch received: which MAC answered, and when.
type ARPReply struct {
	MAC string
	At  time.Time
}

// WatchARP opens an ARP client on eth0 inside the namespace ns and asks for ip every
// interval until Close.
func WatchARP(ns string, ip netip.Addr, interval time.Duration) (*ARPWatch, error) {
	var c *arp.Client
	err := netns.Do(ns, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		c, err = arp.Dial(ifi)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lab: ARP client in %s: %w", ns, err)
	}
	w := &ARPWatch{c: c, ip: ip, stop: make(chan struct{})}
	w.done.Add(2)
	go w.ask(interval)
	go w.read()
	return w, nil
}

func (w *ARPWatch) ask(interval time.Duration) {
	defer w.done.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		at := time.Now()
		if w.c.Request(w.ip) == nil { // a lost request is the next tick's to make up
			w.mu.Lock()
			w.requests = append(w.requests, at)
			w.mu.Unlock()
		}
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

func (w *ARPWatch) read() {
	defer w.done.Done()
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		_ = w.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		p, _, err := w.c.Read()
		if err != nil || p.Operation != arp.OperationReply || p.SenderIP != w.ip {
			continue
		}
		w.mu.Lock()
		w.replies = append(w.replies, ARPReply{MAC: p.SenderHardwareAddr.String(), At: time.Now()})
		w.mu.Unlock()
	}
}

// IP is the address asked for.
func (w *ARPWatch) IP() netip.Addr { return w.ip }

// Close stops asking and closes the socket; calling it again is harmless.
func (w *ARPWatch) Close() {
	select {
	case <-w.stop:
		return
	default:
	}
	close(w.stop)
	w.done.Wait()
	_ = w.c.Close()
}

// MACsSince returns the distinct MACs that answered after t, sorted.
func (w *ARPWatch) MACsSince(t time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.replies {
		if r.At.After(t) && !slices.Contains(out, r.MAC) {
			out = append(out, r.MAC)
		}
	}
	slices.Sort(out)
	return out
}

// FirstFrom returns when mac first answered after t.
func (w *ARPWatch) FirstFrom(mac string, t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.replies {
		if r.At.After(t) && r.MAC == mac {
			return r.At, true
		}
	}
	return time.Time{}, false
}

// LastFrom returns when mac last answered after t.
func (w *ARPWatch) LastFrom(mac string, t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.replies) - 1; i >= 0; i-- {
		if r := w.replies[i]; r.At.After(t) && r.MAC == mac {
			return r.At, true
		}
	}
	return time.Time{}, false
}

// Settle waits until exactly one MAC answers over a whole window, other than any of
// except, and returns it; it gives up after limit.
func (w *ARPWatch) Settle(window, limit time.Duration, except ...string) (string, error) {
	deadline := time.Now().Add(limit)
	var macs []string
	for time.Now().Before(deadline) {
		start := time.Now()
		time.Sleep(window)
		macs = w.MACsSince(start)
		if len(macs) == 1 && !slices.Contains(except, macs[0]) {
			return macs[0], nil
		}
	}
	return "", fmt.Errorf("after %v the MACs answering for %s over the last %v were %v, want exactly one (not %v)", limit, w.ip, window, macs, except)
}

// WhoHas asks from the host's eth0 who has ip for the duration, by ARP or, for an IPv6
// address, by NDP, and returns the distinct MACs that answered, sorted. More than one
// means two nodes claim the IP.
func WhoHas(ns string, ip netip.Addr, wait time.Duration) ([]string, error) {
	start := time.Now()
	if ip.Is6() && !ip.Is4In6() {
		w, err := WatchNDP(ns, ip, 100*time.Millisecond)
		if err != nil {
			return nil, err
		}
		time.Sleep(wait)
		w.Close()
		return w.MACsSince(start), nil
	}
	w, err := WatchARP(ns, ip, 100*time.Millisecond)
	if err != nil {
		return nil, err
	}
	time.Sleep(wait)
	w.Close()
	return w.MACsSince(start), nil
}
