package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"herald.dev/herald/internal/lab/netlab"
)

// stopOrder is the order Down stops the lab's processes in, gently first: speakers
// leave memberlist and the control plane outlives its clients; the control plane
// stopped by SIGTERM also removes etcd's and kube-apiserver's temporary directories.
var stopOrder = []string{"speaker", "controller", "agent", "controlplane"}

// Down removes the lab this process built: its processes, its namespaces (the pods'
// included), every link with them, and its state. Logs stay in the run directory.
func (l *Lab) Down() error {
	err := l.Net.Close()
	return errors.Join(err, finish(l.State.Prefix, l.State.RunDir))
}

// Down removes the lab in runDir, whichever process built it, also when it crashed or
// stopped half-way: the recorded processes are asked to stop, then netlab.Cleanup kills
// whatever runs in a namespace of the prefix and deletes those namespaces. prefix is
// used when the run directory has no state (a lab that never got far). Finding nothing
// is not an error, so Down may run twice.
func Down(runDir, prefix string) error {
	s, err := Load(runDir)
	switch {
	case errors.Is(err, ErrNoLab):
	case err != nil:
		return err
	default:
		prefix = s.Prefix
		stopGently(s)
	}
	return finish(prefix, runDir)
}

func stopGently(s *State) {
	for _, name := range stopOrder {
		// The whole group at once, then wait: speakers leave memberlist together.
		var group []netlab.Proc
		for _, p := range s.Procs {
			if p.Name == name && p.Alive() && p.Signal(unix.SIGTERM) == nil {
				group = append(group, p)
			}
		}
		for _, p := range group {
			_ = p.AwaitExit(stopTimeout) // kills if it does not stop; Cleanup is the backstop
		}
	}
}

// finish is netlab.Cleanup plus the lab's own files: the state, the pod records and
// what the speakers left for a restart, and the mounted memberlist Secrets.
func finish(prefix, runDir string) error {
	err := netlab.Cleanup(prefix, runDir)
	for _, p := range []string{filepath.Join(runDir, stateFile), filepath.Join(runDir, "agents"), filepath.Join(runDir, "memberlist"), filepath.Join(runDir, speakerStateDir)} {
		if rerr := os.RemoveAll(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	if left := labNamespaces(prefix); len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("lab: namespaces %v remain", left))
	}
	return err
}
