package lab

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"

	"herald.dev/herald/internal/netns"
)

// RoundTrips resolves ip from eth0 of the namespace ns n times in a row, by ARP or,
// for an IPv6 address, by NDP (a solicitation to its solicited-node group), each time
// waiting up to a second for the answer that carries mac, and returns the round trips
// per second: how fast one responder answers one asker. Answers from other MACs are
// ignored.
func RoundTrips(ns string, ip netip.Addr, mac string, n int) (float64, error) {
	var ask func() error
	var wait func() (string, error)
	if ip.Is6() && !ip.Is4In6() {
		c, own, err := dialNDP(ns)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		group, _ := ndp.SolicitedNodeMulticast(ip)
		solicit := &ndp.NeighborSolicitation{TargetAddress: ip,
			Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: own}}}
		ask = func() error { return c.WriteTo(solicit, nil, group) }
		wait = func() (string, error) {
			m, _, _, err := c.ReadFrom()
			if err != nil {
				return "", err
			}
			got, _ := targetMAC(m, ip)
			return got, nil
		}
		return roundTrips(ip, mac, n, ask, wait, c.SetReadDeadline)
	}
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
		return 0, fmt.Errorf("lab: ARP client in %s: %w", ns, err)
	}
	defer c.Close()
	ask = func() error { return c.Request(ip) }
	wait = func() (string, error) {
		p, _, err := c.Read()
		if err != nil {
			return "", err
		}
		if p.Operation != arp.OperationReply || p.SenderIP != ip {
			return "", nil
		}
		return p.SenderHardwareAddr.String(), nil
	}
	return roundTrips(ip, mac, n, ask, wait, c.SetReadDeadline)
}

// roundTrips runs n questions one after the other and times them.
func roundTrips(ip netip.Addr, mac string, n int, ask func() error, wait func() (string, error), deadline func(time.Time) error) (float64, error) {
	start := time.Now()
	for i := range n {
		if err := ask(); err != nil {
			return 0, fmt.Errorf("lab: asking for %s: %w", ip, err)
		}
		_ = deadline(time.Now().Add(time.Second))
		for {
			got, err := wait()
			if err != nil {
				return 0, fmt.Errorf("lab: question %d of %d for %s, no answer from %s: %w", i+1, n, ip, mac, err)
			}
			if got == mac {
				break
			}
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
