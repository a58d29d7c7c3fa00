package lab

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"

	"herald.dev/herald/internal/netns"
)

// NDPWatch is ARPWatch for IPv6: it sends a neighbour solicitation for an IP from a
// host's eth0 every interval, as a LAN host resolving the address does, and records
// every neighbour advertisement for it (the MAC in its target link-layer address
// option, and when).
type NDPWatch struct {
	replyLog
	c   *ndp.Conn
	mac net.HardwareAddr // eth0's, the solicitations' source link-layer address

	stop chan struct{}
	done sync.WaitGroup
}

// WatchNDP opens an ICMPv6 socket on eth0's link-local address inside the namespace ns
// and solicits ip every interval until Close. The solicitations come from that
// link-local address, so they are never taken for duplicate address detection, and
// the answers come back to it.
func WatchNDP(ns string, ip netip.Addr, interval time.Duration) (*NDPWatch, error) {
	if !ip.Is6() || ip.Is4In6() {
		return nil, fmt.Errorf("lab: NDP watch of %s: not an IPv6 address", ip)
	}
	w := &NDPWatch{replyLog: replyLog{ip: ip}, stop: make(chan struct{})}
	err := netns.Do(ns, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		w.mac = ifi.HardwareAddr
		// ndp binds to the link-local address with the interface's name as its zone,
		// which Go resolves through a process-wide cache of names: in a test that
		// visits several namespaces, "eth0" may be another namespace's eth0 there. A
		// numeric zone is the index itself.
		byIndex := *ifi
		byIndex.Name = strconv.Itoa(ifi.Index)
		if w.c, _, err = ndp.Listen(&byIndex, ndp.LinkLocal); err != nil {
			return err
		}
		var only ipv6.ICMPFilter
		only.SetAll(true)
		only.Accept(ipv6.ICMPTypeNeighborAdvertisement)
		if err := w.c.SetICMPFilter(&only); err != nil {
			_ = w.c.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lab: NDP client in %s: %w", ns, err)
	}
	w.done.Add(2)
	go w.ask(interval)
	go w.read()
	return w, nil
}

func (w *NDPWatch) ask(interval time.Duration) {
	defer w.done.Done()
	group, _ := ndp.SolicitedNodeMulticast(w.ip) // ip is IPv6: no error
	ns := &ndp.NeighborSolicitation{TargetAddress: w.ip,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: w.mac}}}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		_ = w.c.WriteTo(ns, nil, group) // a lost solicitation is the next tick's to make up
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

func (w *NDPWatch) read() {
	defer w.done.Done()
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		_ = w.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		m, _, _, err := w.c.ReadFrom()
		if err != nil {
			continue
		}
		na, ok := m.(*ndp.NeighborAdvertisement)
		if !ok || na.TargetAddress != w.ip {
			continue
		}
		for _, o := range na.Options {
			if l, ok := o.(*ndp.LinkLayerAddress); ok && l.Direction == ndp.Target {
				w.record(l.Addr.String(), time.Now())
			}
		}
	}
}

// Close stops soliciting and closes the socket; calling it again is harmless.
func (w *NDPWatch) Close() {
	select {
	case <-w.stop:
		return
	default:
	}
	close(w.stop)
	w.done.Wait()
	_ = w.c.Close()
}
