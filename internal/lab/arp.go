package lab

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mdlayher/arp"

	"herald.dev/herald/internal/netns"
)

// ARPWatch asks who has an IP from a host's eth0 every interval and records every
// reply: which MAC answered and when. It is how a machine on the LAN sees a VIP move,
// without depending on the arping command.
type ARPWatch struct {
	replyLog
	c *arp.Client

	watchLoops
	requests []time.Time // when each request went out, under replyLog.mu
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
	w := &ARPWatch{replyLog: replyLog{ip: ip}, c: c}
	w.start(interval, w.ask, w.read)
	return w, nil
}

func (w *ARPWatch) ask() {
	at := time.Now()
	if w.c.Request(w.ip) == nil {
		w.mu.Lock()
		w.requests = append(w.requests, at)
		w.mu.Unlock()
	}
}

func (w *ARPWatch) read() {
	_ = w.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	p, _, err := w.c.Read()
	if err != nil || p.Operation != arp.OperationReply || p.SenderIP != w.ip {
		return
	}
	w.record(p.SenderHardwareAddr.String(), time.Now())
}

// Close stops asking and closes the socket; calling it again is harmless.
func (w *ARPWatch) Close() { w.shut(w.c.Close) }

// WhoHas asks from the host's eth0 who has ip for the duration, by ARP or, for an IPv6
// address, by NDP, and returns the distinct MACs that answered, sorted. More than one
// means two nodes claim the IP.
func WhoHas(ns string, ip netip.Addr, wait time.Duration) ([]string, error) {
	start := time.Now()
	w, err := WatchNeighbour(ns, ip, 100*time.Millisecond)
	if err != nil {
		return nil, err
	}
	time.Sleep(wait)
	w.Close()
	return w.MACsSince(start), nil
}
