package netlab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"herald.dev/herald/internal/netns"
)

// Cleanup removes what a lab with this prefix left behind when its run crashed before
// Close: it kills the processes recorded in runDir/pids (only those whose command line
// still matches the record), then deletes every namespace named <prefix>[a-z0-9]+ with
// whatever still runs inside. runDir may be empty when there is none. Nothing else is
// touched, and finding nothing is not an error.
func Cleanup(prefix, runDir string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	if err := Check(); err != nil {
		return err
	}
	var errs []error
	if runDir != "" {
		if err := killRecorded(runDir); err != nil {
			errs = append(errs, err)
		}
	}
	all, err := Namespaces(prefix)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	// Hosts before the bridge, as Close does; not that the order matters much.
	bridge := prefix + bridgeSuffix
	slices.SortFunc(all, func(a, b string) int {
		return boolInt(a == bridge) - boolInt(b == bridge)
	})
	for _, ns := range all {
		if err := DeleteNamespace(ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// AddNamespace creates the network namespace ns, for tests that cable namespaces
// themselves rather than through a Lab; DeleteNamespace removes it.
func AddNamespace(ns string) error {
	_, err := ip("netns", "add", ns)
	return err
}

// DeleteNamespace kills what still runs in the namespace ns (see the package comment
// for why that is ours to kill) and deletes it. A namespace already gone is fine.
func DeleteNamespace(ns string) error {
	if _, err := os.Stat(filepath.Join(netns.Dir, ns)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var errs []error
	// A process found here may just be forking; a couple of rounds catch children
	// started meanwhile.
	for range 3 {
		pids, err := namespacePids(ns)
		if err != nil {
			if isNoNamespace(err) {
				return nil
			}
			errs = append(errs, err)
			break
		}
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("netlab killing pid %d in %s: %w", pid, ns, err))
			}
		}
		waitGone(pids, 5*time.Second)
	}
	if _, err := ip("netns", "delete", ns); err != nil && !isNoNamespace(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func namespacePids(ns string) ([]int, error) {
	out, err := ip("netns", "pids", ns)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("netlab: `ip netns pids %s` printed %q", ns, f)
		}
		if pid != os.Getpid() { // never ourselves, whatever happened
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// waitGone waits until none of pids exists any more or the time is up. A killed
// process that nobody reaps stays a zombie, but a zombie no longer holds its
// namespace, so zombies count as gone.
func waitGone(pids []int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		alive := false
		for _, pid := range pids {
			if st, ok := readProcStat(pid); ok && !st.zombie {
				alive = true
			}
		}
		if !alive {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isNoNamespace recognises ip's complaint about a namespace that vanished meanwhile.
func isNoNamespace(err error) bool {
	s := err.Error()
	return strings.Contains(s, "No such file or directory")
}
