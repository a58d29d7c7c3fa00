package layer2

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sysClassNet is where the kernel describes network devices.
const sysClassNet = "/sys/class/net"

// iffNoARP is IFF_NOARP in /sys/class/net/<if>/flags.
const iffNoARP = 0x80

// ReadInterfaces lists this network namespace's interfaces with their Facts, from
// net.Interfaces and /sys/class/net.
func ReadInterfaces() ([]Facts, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]Facts, 0, len(ifs))
	for _, ifi := range ifs {
		addrs, _ := ifi.Addrs() // an interface that vanished meanwhile has none
		out = append(out, factsOf(ifi, addrs, sysClassNet))
	}
	return out, nil
}

// factsOf completes an interface's facts from its addresses and sysfs under root.
// Unreadable sysfs files leave the flag false: the interface is then judged on what
// net.Interface says.
func factsOf(ifi net.Interface, addrs []net.Addr, root string) Facts {
	f := Facts{Interface: ifi}
	dir := filepath.Join(root, ifi.Name)
	if b, err := os.ReadFile(filepath.Join(dir, "flags")); err == nil {
		s := strings.TrimPrefix(strings.TrimSpace(string(b)), "0x")
		if v, err := strconv.ParseUint(s, 16, 32); err == nil {
			f.NoARP = v&iffNoARP != 0
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "master")); err == nil {
		f.Slave = true
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() == nil && n.IP.To16() != nil {
			f.IPv6 = true
		}
	}
	return f
}
