package lab

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
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
	c *ndp.Conn
	watchLoops
	// solicit is sent to the solicited-node multicast group of the IP, with eth0's
	// MAC as its source link-layer address.
	solicit *ndp.NeighborSolicitation
	group   netip.Addr
}

// WatchNDP opens an ICMPv6 socket on eth0's link-local address inside the namespace ns
// and solicits ip every interval until Close. The solicitations come from that
// link-local address, so they are never taken for duplicate address detection, and
// the answers come back to it.
func WatchNDP(ns string, ip netip.Addr, interval time.Duration) (*NDPWatch, error) {
	if !ip.Is6() || ip.Is4In6() {
		return nil, fmt.Errorf("lab: NDP watch of %s: not an IPv6 address", ip)
	}
	group, _ := ndp.SolicitedNodeMulticast(ip) // ip is IPv6: no error
	c, mac, err := dialNDP(ns)
	if err != nil {
		return nil, err
	}
	w := &NDPWatch{replyLog: replyLog{ip: ip}, c: c, group: group, solicit: &ndp.NeighborSolicitation{TargetAddress: ip,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac}}}}
	w.start(interval, w.ask, w.read)
	return w, nil
}

// dialNDP opens an ICMPv6 socket on the link-local address of eth0 in the namespace ns
// that receives only neighbour advertisements, and returns it with eth0's MAC.
func dialNDP(ns string) (*ndp.Conn, net.HardwareAddr, error) {
	var c *ndp.Conn
	var mac net.HardwareAddr
	err := netns.Do(ns, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		mac = ifi.HardwareAddr
		// ndp binds to the link-local address with the interface's name as its zone,
		// which Go resolves through a process-wide cache of names: in a test that
		// visits several namespaces, "eth0" may be another namespace's eth0 there. A
		// numeric zone is the index itself.
		byIndex := *ifi
		byIndex.Name = strconv.Itoa(ifi.Index)
		if c, _, err = ndp.Listen(&byIndex, ndp.LinkLocal); err != nil {
			return err
		}
		var only ipv6.ICMPFilter
		only.SetAll(true)
		only.Accept(ipv6.ICMPTypeNeighborAdvertisement)
		if err := c.SetICMPFilter(&only); err != nil {
			_ = c.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("lab: NDP client in %s: %w", ns, err)
	}
	return c, mac, nil
}

// targetMAC is the target link-layer address of an advertisement for ip, if m is one.
func targetMAC(m ndp.Message, ip netip.Addr) (string, bool) {
	na, ok := m.(*ndp.NeighborAdvertisement)
	if !ok || na.TargetAddress != ip {
		return "", false
	}
	for _, o := range na.Options {
		if l, ok := o.(*ndp.LinkLayerAddress); ok && l.Direction == ndp.Target {
			return l.Addr.String(), true
		}
	}
	return "", false
}

func (w *NDPWatch) ask() { _ = w.c.WriteTo(w.solicit, nil, w.group) }

func (w *NDPWatch) read() {
	_ = w.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	m, _, _, err := w.c.ReadFrom()
	if err != nil {
		return
	}
	if mac, ok := targetMAC(m, w.ip); ok {
		w.record(mac, time.Now())
	}
}

// Close stops soliciting and closes the socket; calling it again is harmless.
func (w *NDPWatch) Close() { w.shut(w.c.Close) }
