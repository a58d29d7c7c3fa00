package netlab

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns add` bind-mounts the namespaces it names.
const netnsDir = "/run/netns"

// inNamespace runs fn on an OS thread that has joined the network namespace ns, so that
// the sockets fn creates belong to ns; they keep belonging to it after the thread
// returns to its own namespace, wherever they are used from.
//
// fn runs on a goroutine of its own, locked to its thread: the namespace is a property
// of the thread, and only that goroutine may run there while it is switched. fn must
// not rely on other goroutines being in ns (they are not). Should switching back fail,
// the thread stays locked, so the runtime discards it when the goroutine ends rather
// than reuse a thread in the wrong namespace.
func inNamespace(ns string, fn func() error) error {
	target, err := os.Open(filepath.Join(netnsDir, ns))
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", ns, err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("opening this thread's network namespace: %w", err)
			return
		}
		defer home.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering network namespace %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("leaving network namespace %s: %w", ns, err)
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// Do runs fn with the calling thread in the host's network namespace: sockets, netlink
// connections and /proc/sys/net files fn opens belong to the host. See inNamespace for
// what fn must not do.
func (h *Host) Do(fn func() error) error { return inNamespace(h.ns, fn) }

// DialContext connects from inside the host's namespace, so a process in the root
// namespace (a go test) can talk to a server that listens only there, such as the lab's
// kube-apiserver. It fits rest.Config.Dial and http.Transport.DialContext. The address
// must be an IP literal: names would be resolved by other goroutines, outside the
// namespace.
func (h *Host) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if err := ipLiteral(address); err != nil {
		return nil, err
	}
	var conn net.Conn
	err := h.Do(func() error {
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dialing %s %s from %s: %w", network, address, h.ns, err)
	}
	return conn, nil
}

// Listen listens inside the host's namespace; connections accepted are the host's.
func (h *Host) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := h.Do(func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in %s: %w", network, address, h.ns, err)
	}
	return l, nil
}

// ListenPacket is Listen for packet sockets (UDP, raw IP).
func (h *Host) ListenPacket(network, address string) (net.PacketConn, error) {
	var c net.PacketConn
	err := h.Do(func() error {
		var err error
		c, err = net.ListenPacket(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in %s: %w", network, address, h.ns, err)
	}
	return c, nil
}

func ipLiteral(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("netlab dial address %q: %w", address, err)
	}
	if net.ParseIP(host) == nil {
		return fmt.Errorf("netlab dial address %q: want an IP address, not a name", address)
	}
	return nil
}
