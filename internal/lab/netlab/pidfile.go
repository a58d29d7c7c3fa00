package netlab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// pidDir, under a lab's run directory, records the processes the lab started, so that
// Cleanup can stop them after the test that started them crashed.
const pidDir = "pids"

// pidRecord is a pid file's content: enough to tell that the PID still denotes the
// process the lab started rather than a stranger that reused it.
type pidRecord struct {
	Pid       int      `json:"pid"`
	Namespace string   `json:"namespace"`
	Args      []string `json:"args"`
}

func writePidFile(runDir, name string, pid int, ns string, args []string) (string, error) {
	b, err := json.Marshal(pidRecord{Pid: pid, Namespace: ns, Args: args})
	if err != nil {
		return "", err
	}
	path := filepath.Join(runDir, pidDir, name+".pid")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("netlab pid file: %w", err)
	}
	return path, nil
}

func readPidFile(path string) (pidRecord, error) {
	var r pidRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("netlab pid file: %w", err)
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &r); err != nil || r.Pid <= 1 {
		return r, fmt.Errorf("netlab pid file %s: unreadable (%v), left alone", path, err)
	}
	return r, nil
}

// matches reports whether the process now running as r.Pid is the one recorded. Its
// command line is `ip netns exec NS ARGS...` until ip has joined the namespace and then
// ARGS... once ip has exec'd the command; either will do.
func (r pidRecord) matches() bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", r.Pid))
	if err != nil || len(raw) == 0 { // gone, or a zombie
		return false
	}
	got := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	return slices.Equal(got, r.Args) ||
		slices.Equal(got, append([]string{"ip", "netns", "exec", r.Namespace}, r.Args...))
}

// killRecorded SIGKILLs the processes recorded in runDir/pids whose command lines still
// match, with their groups, and removes the pid files.
func killRecorded(runDir string) error {
	dir := filepath.Join(runDir, pidDir)
	files, err := filepath.Glob(filepath.Join(dir, "*.pid"))
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		r, err := readPidFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if r.matches() {
			// The lab started it as a group leader; kill the group if it still leads
			// one, else the process alone.
			target := r.Pid
			if pgid, err := unix.Getpgid(r.Pid); err == nil && pgid == r.Pid {
				target = -r.Pid
			}
			if err := unix.Kill(target, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("netlab killing pid %d from %s: %w", r.Pid, f, err))
				continue
			}
		}
		if err := os.Remove(f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
