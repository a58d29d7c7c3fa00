package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/arp"

	"herald.dev/herald/internal/netlab"
)

// arpWatch asks who has an IP, from a client namespace, every interval, and records
// every reply: which MAC answered and when. It is how a LAN host sees a VIP move.
type arpWatch struct {
	c  *arp.Client
	ip netip.Addr

	mu      sync.Mutex
	replies []arpReply
	stop    chan struct{}
	done    sync.WaitGroup
}

type arpReply struct {
	mac string
	at  time.Time
}

// watchARP opens an ARP client on the host's eth0 (inside its namespace) and starts
// asking for ip every interval until the test ends.
func watchARP(t testing.TB, h *netlab.Host, ip netip.Addr, interval time.Duration) *arpWatch {
	t.Helper()
	var c *arp.Client
	err := h.Do(func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		c, err = arp.Dial(ifi)
		return err
	})
	if err != nil {
		t.Fatalf("ARP client in %s: %v", h.Namespace(), err)
	}
	w := &arpWatch{c: c, ip: ip, stop: make(chan struct{})}
	w.done.Add(2)
	go w.ask(interval)
	go w.read()
	t.Cleanup(w.close)
	return w
}

func (w *arpWatch) ask(interval time.Duration) {
	defer w.done.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		_ = w.c.Request(w.ip)
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

func (w *arpWatch) read() {
	defer w.done.Done()
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		_ = w.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		p, _, err := w.c.Read()
		if err != nil {
			continue
		}
		if p.Operation != arp.OperationReply || p.SenderIP != w.ip {
			continue
		}
		w.mu.Lock()
		w.replies = append(w.replies, arpReply{mac: p.SenderHardwareAddr.String(), at: time.Now()})
		w.mu.Unlock()
	}
}

func (w *arpWatch) close() {
	select {
	case <-w.stop:
		return
	default:
	}
	close(w.stop)
	w.done.Wait()
	_ = w.c.Close()
}

// macsSince returns the distinct MACs that answered after t, sorted.
func (w *arpWatch) macsSince(t time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.replies {
		if r.at.After(t) && !slices.Contains(out, r.mac) {
			out = append(out, r.mac)
		}
	}
	slices.Sort(out)
	return out
}

// firstFrom returns when mac first answered after t.
func (w *arpWatch) firstFrom(mac string, t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.replies {
		if r.at.After(t) && r.mac == mac {
			return r.at, true
		}
	}
	return time.Time{}, false
}

// settle waits until, over a whole window, exactly one MAC answers, and returns it.
func (w *arpWatch) settle(window, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for {
		start := time.Now()
		time.Sleep(window)
		macs := w.macsSince(start)
		if len(macs) == 1 {
			return macs[0], nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("after %v, the MACs answering for %s over the last %v were %v, want exactly one", limit, w.ip, window, macs)
		}
	}
}
