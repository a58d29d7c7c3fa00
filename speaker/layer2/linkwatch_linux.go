package layer2

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"
)

// watchLinks calls changed whenever the kernel reports a link change (an interface
// appearing, disappearing, going up or down, losing or regaining carrier), so that
// responders follow at once rather than at the next periodic scan: a node whose cable
// comes back must answer for its IPs before its peers hand them back to it.
func watchLinks(ctx context.Context, changed func()) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("subscribing to link changes: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { unix.Shutdown(fd, unix.SHUT_RDWR) })
	defer stop()
	defer unix.Close(fd)
	// A timeout lets the loop notice ctx even where shutdown does not wake recvfrom.
	tv := unix.Timeval{Sec: 1}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 64<<10)
	for ctx.Err() == nil {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err == unix.ENOBUFS:
			changed() // messages were lost: rescan anyway
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("reading link changes: %w", err)
		case n > 0:
			changed()
		}
	}
	return nil
}
