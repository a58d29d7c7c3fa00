//go:build !linux

package layer2

import (
	"errors"
	"net/netip"
)

var errNotLinux = errors.New("layer2: IPv6 group membership is implemented on Linux only")

// groupSocket is Linux-only; elsewhere ListenNDP fails.
type groupSocket struct{}

func openGroups(int) (groupSocket, error)  { return groupSocket{}, errNotLinux }
func (groupSocket) join(netip.Addr) error  { return errNotLinux }
func (groupSocket) leave(netip.Addr) error { return errNotLinux }
func (*groupSocket) close() error          { return nil }
