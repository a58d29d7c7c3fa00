//go:build linux

package nftoracle

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// InNetNS runs fn on a goroutine whose OS thread has joined the named
// network namespace (one made with "ip netns add <name>", i.e. bound at
// /var/run/netns/<name>), and returns fn's error. Processes started from that
// goroutine, such as the nft that a knftables.New interface runs, inherit the
// namespace; so build the real interface, New the Oracle and call Sync inside
// fn. The thread never returns to the caller's namespace: it stays locked and
// the Go runtime ends it when the goroutine exits. Joining a namespace needs
// CAP_SYS_ADMIN.
func InNetNS(name string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		// No UnlockOSThread: the thread must not go back to the pool in
		// another namespace, so it exits with this goroutine.
		runtime.LockOSThread()
		ns, err := netns.GetFromName(name)
		if err != nil {
			done <- fmt.Errorf("open network namespace %q: %w", name, err)
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			done <- fmt.Errorf("join network namespace %q: %w", name, err)
			return
		}
		done <- fn()
	}()
	return <-done
}
