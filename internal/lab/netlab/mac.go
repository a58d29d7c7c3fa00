package netlab

import (
	"net"
	"net/netip"
)

// MACFor is the MAC address a host with this address gets on eth0: 02:42 followed by the
// last four bytes of the address, the scheme docker (and so kind) uses for IPv4, so
// 172.18.0.3 is 02:42:ac:12:00:03. 0x02 marks it locally administered. Tests predict
// who answers ARP from it.
func MACFor(addr netip.Addr) net.HardwareAddr {
	b := addr.As16()
	return net.HardwareAddr{0x02, 0x42, b[12], b[13], b[14], b[15]}
}
