package netlab

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// pingTimeout applies when the context has no deadline.
const pingTimeout = time.Second

// Ping sends one ICMP echo request from the host to dst and waits for the reply until
// ctx's deadline (one second without one), like `ping -c1 -W1`. It is done here rather
// than with the ping command, which machines running the tests need not have.
func (h *Host) Ping(ctx context.Context, dst netip.Addr) error {
	network, listen, proto := "ip4:icmp", "0.0.0.0", 1
	var echo, reply icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	if dst.Is6() {
		network, listen, proto = "ip6:ipv6-icmp", "::", 58
		echo, reply = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	var c *icmp.PacketConn
	// A raw socket (we are root) rather than an unprivileged ping socket, which new
	// namespaces do not allow (net.ipv4.ping_group_range).
	if err := h.Do(func() (err error) { c, err = icmp.ListenPacket(network, listen); return err }); err != nil {
		return fmt.Errorf("ping from %s: %w", h.name, err)
	}
	defer c.Close()

	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(pingTimeout)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Now()) })
	defer stop()
	if err := c.SetReadDeadline(deadline); err != nil {
		return err
	}

	// A raw socket sees every ICMP packet of the namespace, so the reply is told apart
	// by its ID, sequence number and sender.
	id, seq := rand.IntN(1<<16), rand.IntN(1<<16)
	req, err := (&icmp.Message{Type: echo, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("netlab")}}).Marshal(nil)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(req, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		return fmt.Errorf("ping %s from %s: %w", dst, h.name, err)
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = errors.New("no reply")
			}
			return fmt.Errorf("ping %s from %s: %w", dst, h.name, err)
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != reply {
			continue
		}
		e, ok := m.Body.(*icmp.Echo)
		src, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP)
		if ok && e.ID == id && e.Seq == seq && src.Unmap() == dst {
			return nil
		}
	}
}
