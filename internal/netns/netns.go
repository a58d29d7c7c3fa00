// Package netns runs code inside a named network namespace (/run/netns/NAME) from a Go
// process that lives elsewhere: a go test in the root namespace talking to a lab
// host (netlab's Host methods), the lab CLI talking to the client namespace, the lab
// agent in a worker namespace serving HTTP in pod namespaces.
package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dir is where `ip netns add` bind-mounts the namespaces it names.
const Dir = "/run/netns"

// Do runs fn on an OS thread that has joined the network namespace name, so that the
// sockets (and netlink connections, and /proc/sys/net files) fn opens belong to it;
// they keep belonging to it wherever they are used from afterwards.
//
// fn runs on a goroutine of its own locked to its thread, because the namespace is a
// property of the thread; fn must not expect other goroutines to be in the namespace.
// If the thread cannot switch back it stays locked, so the runtime throws it away when
// the goroutine ends instead of reusing a thread in the wrong namespace.
func Do(name string, fn func() error) error {
	target, err := os.Open(filepath.Join(Dir, name))
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", name, err)
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
			done <- fmt.Errorf("entering network namespace %s: %w", name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("leaving network namespace %s: %w", name, err)
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// Listen listens inside the namespace name.
func Listen(name, network, address string) (net.Listener, error) {
	var l net.Listener
	err := Do(name, func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in %s: %w", network, address, name, err)
	}
	return l, nil
}

// ListenPacket is Listen for packet sockets (UDP, raw IP).
func ListenPacket(name, network, address string) (net.PacketConn, error) {
	var c net.PacketConn
	err := Do(name, func() error {
		var err error
		c, err = net.ListenPacket(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in %s: %w", network, address, name, err)
	}
	return c, nil
}

// Dialer returns a DialContext that connects from inside the namespace name, for
// http.Transport and rest.Config. Addresses must be IP literals: a name would be
// resolved by other goroutines, outside the namespace.
func Dialer(name string) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("dial address %q: %w", address, err)
		}
		if net.ParseIP(host) == nil {
			return nil, fmt.Errorf("dial address %q from %s: want an IP address, not a name", address, name)
		}
		var conn net.Conn
		err = Do(name, func() error {
			var d net.Dialer
			var err error
			conn, err = d.DialContext(ctx, network, address)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("dialing %s %s from %s: %w", network, address, name, err)
		}
		return conn, nil
	}
}

// Exists reports whether the named namespace exists.
func Exists(name string) bool {
	_, err := os.Stat(filepath.Join(Dir, name))
	return err == nil
}
