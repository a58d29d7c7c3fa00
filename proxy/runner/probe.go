package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
)

// Installed reports, for each name, whether exec.LookPath finds it in $PATH.
func Installed(names ...string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		_, err := exec.LookPath(n)
		out[n] = err == nil
	}
	return out
}

// IPv6Kernel reports whether the kernel has IPv6 in the namespace: /proc/sys/net/ipv6
// exists. A kernel booted with ipv6.disable=1 has no such directory, and ip6tables
// cannot program it. (disable_ipv6=1 on the interfaces is different: IPv6 is there,
// the tables work, and the proxier programs them.)
func IPv6Kernel(do Do) (bool, error) {
	if do == nil {
		do = direct
	}
	err := do(func() error {
		_, err := os.Stat("/proc/sys/net/ipv6")
		return err
	})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("looking for IPv6 in the kernel: %w", err)
}
