package netlab

import (
	"context"
	"net"

	"herald.dev/herald/internal/netns"
)

// Do runs fn with the calling thread in the host's network namespace: sockets, netlink
// connections and /proc/sys/net files fn opens belong to the host. See netns.Do for
// what fn must not do.
func (h *Host) Do(fn func() error) error { return netns.Do(h.ns, fn) }

// DialContext connects from inside the host's namespace, so a process in the root
// namespace (a go test) can talk to a server that listens only there, such as the lab's
// kube-apiserver. It fits rest.Config.Dial and http.Transport.DialContext. The address
// must be an IP literal: names would be resolved by other goroutines, outside the
// namespace.
func (h *Host) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return netns.Dialer(h.ns)(ctx, network, address)
}

// Listen listens inside the host's namespace; connections accepted are the host's.
func (h *Host) Listen(network, address string) (net.Listener, error) {
	return netns.Listen(h.ns, network, address)
}

// ListenPacket is Listen for packet sockets (UDP, raw IP).
func (h *Host) ListenPacket(network, address string) (net.PacketConn, error) {
	return netns.ListenPacket(h.ns, network, address)
}
