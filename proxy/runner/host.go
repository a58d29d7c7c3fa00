package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strings"
)

// Sysctl reads /proc/sys/<name with dots as slashes> in the namespace. A missing file
// (the module is not loaded) returns "" and no error.
func Sysctl(do Do, name string) (string, error) {
	if do == nil {
		do = direct
	}
	path := "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
	var data []byte
	err := do(func() error {
		var err error
		data, err = os.ReadFile(path)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading sysctl %s: %w", name, err)
	}
	return strings.TrimSpace(string(data)), nil
}

// InterfaceAddrs lists the addresses on the namespace's interfaces.
func InterfaceAddrs(do Do) ([]netip.Addr, error) {
	if do == nil {
		do = direct
	}
	var addrs []net.Addr
	err := do(func() error {
		var err error
		addrs, err = net.InterfaceAddrs()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing interface addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}
