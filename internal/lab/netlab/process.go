package netlab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a long-running command the lab started in a host's namespace, leader of a
// process group of its own so that it and its helpers can be signalled together.
type Process struct {
	name    string // <host>-<name>, for logs and pid files
	cmd     *exec.Cmd
	logPath string
	pidPath string

	done chan struct{} // closed once Wait has reaped the process
	err  error         // cmd.Wait's result, set before done closes
	once sync.Once
}

// Start runs args in the host's namespace with stdout and stderr appended to
// <runDir>/<host>-<name>.log, records its PID in <runDir>/pids/<host>-<name>.pid for
// Cleanup, and returns once it has started. Lab.Close stops it.
func (h *Host) Start(name string, args ...string) (*Process, error) {
	if len(args) == 0 {
		return nil, errors.New("netlab Start: no command")
	}
	full := h.name + "-" + name
	l := h.lab
	if !procRE.MatchString(name) {
		return nil, fmt.Errorf("netlab process name %q: want [a-zA-Z0-9._-]+, it names files", name)
	}
	if l.running(full) {
		// Its log and pid file are taken; a restart must follow the exit.
		return nil, fmt.Errorf("netlab process %s is running already", full)
	}
	logPath := filepath.Join(l.runDir, full+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("netlab log for %s: %w", full, err)
	}
	defer logf.Close() // the child has its own copy
	// `ip netns exec` also gives the command a /sys showing the namespace's
	// interfaces, and then execs it, so the PID is the command's own.
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.ns}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(logf, "netlab: starting %q in %s at %s\n", args, h.ns, time.Now().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("netlab starting %s: %w", full, err)
	}
	p := &Process{name: full, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	pidPath, err := writePidFile(l.runDir, full, cmd.Process.Pid, h.ns, args)
	p.pidPath = pidPath
	l.mu.Lock()
	l.procs = append(l.procs, p) // even on error, so that Close reaps it
	l.mu.Unlock()
	if err != nil {
		return p, errors.Join(err, p.Kill())
	}
	return p, nil
}

// Pid is the process's ID, also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file holding the process's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Signal sends sig to the process alone (not its group), as a kubelet stopping a
// container would; use Kill for the group.
func (p *Process) Signal(sig os.Signal) error {
	if p.Exited() {
		return fmt.Errorf("netlab process %s: already exited", p.name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("netlab signalling %s: %w", p.name, err)
	}
	return nil
}

// Kill sends SIGKILL to the process's whole group, and does not wait.
func (p *Process) Kill() error {
	// The group outlives its leader while helpers run, and its ID cannot be reused
	// while it has members, so this is safe after the leader exited too.
	if err := unix.Kill(-p.Pid(), unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("netlab killing %s: %w", p.name, err)
	}
	return nil
}

// Stop asks the process to end with SIGTERM, waits up to timeout, then kills its group
// (also when it ended in time, for helpers it left behind). An exit caused by the
// signals is not an error.
func (p *Process) Stop(timeout time.Duration) error {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(unix.SIGTERM) // fails only if it exited meanwhile
		select {
		case <-p.done:
		case <-time.After(timeout):
		}
	}
	if err := p.Kill(); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("netlab process %s (pid %d) survived SIGKILL for %s", p.name, p.Pid(), timeout)
	}
}

// Wait blocks until the process has exited and returns how (exec.Cmd.Wait's error).
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Exited reports whether the process has exited (and been reaped).
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// running reports whether a process of the lab called full (<host>-<name>) still runs.
func (l *Lab) running(full string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.procs {
		if p.name == full && !p.Exited() {
			return true
		}
	}
	return false
}

// forget removes the pid file once the process is known to be gone, unless a
// successor of the same name has rewritten it.
func (p *Process) forget() {
	p.once.Do(func() {
		if p.pidPath == "" || !p.Exited() {
			return
		}
		if r, err := readPidFile(p.pidPath); err == nil && r.Pid == p.Pid() {
			_ = os.Remove(p.pidPath)
		}
	})
}
