package speaker

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// linkDown says whether the interface holding memberlist's address has lost its
// carrier. It runs four times a second, so it reads one sysfs file; the interface is
// looked up among all only when unknown or gone, at most every bindLookupEvery. An
// address on no interface (a test binding to loopback, say) counts as up.
func (s *Speaker) linkDown() bool {
	if s.bind.iface != "" {
		b, err := os.ReadFile(filepath.Join("/sys/class/net", s.bind.iface, "carrier"))
		switch {
		case err == nil:
			return strings.TrimSpace(string(b)) != "1"
		case errors.Is(err, syscall.EINVAL):
			return true // the kernel refuses to read the carrier of an interface set down
		}
		s.bind.iface = "" // renamed or gone: look it up again
	}
	if time.Since(s.bind.lookedUp) < bindLookupEvery {
		return false
	}
	s.bind.lookedUp = time.Now()
	s.bind.iface = interfaceOf(s.cfg.Members.BindAddr)
	return false
}

const bindLookupEvery = 5 * time.Second

// interfaceOf returns the name of the interface holding addr, or "".
func interfaceOf(addr string) string {
	bind, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifi := range ifaces {
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == bind {
				return ifi.Name
			}
		}
	}
	return ""
}
