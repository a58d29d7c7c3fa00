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

// Process is a Proc this process started and reaps: besides what the record allows, it
// can wait for the exit and tell how the process ended.
type Process struct {
	Proc
	cmd     *exec.Cmd
	pidPath string

	done chan struct{} // closed once Wait has reaped the process
	err  error         // cmd.Wait's result, set before done closes
	once sync.Once
}

// Start runs args in the host's namespace (see Spawn) and has Lab.Close stop it.
func (h *Host) Start(name string, args ...string) (*Process, error) {
	return h.StartWrapped(name, nil, args...)
}

// StartWrapped is Start for a command that wrapper execs (nsenter, say): the process
// is recorded as running cmd, which it does once the wrapper is done.
func (h *Host) StartWrapped(name string, wrapper []string, cmd ...string) (*Process, error) {
	l := h.lab
	full := h.name + "-" + name
	if l.running(full) {
		// Its log and pid file are taken; a restart must follow the exit.
		return nil, fmt.Errorf("netlab process %s is running already", full)
	}
	p, err := Spawn(l.runDir, h.ns, h.name, name, wrapper, cmd)
	if p != nil {
		l.mu.Lock()
		l.procs = append(l.procs, p) // even on error, so that Close reaps it
		l.mu.Unlock()
	}
	return p, err
}

// Spawn runs wrapper+cmd in the namespace ns as process name of host, leader of a
// process group of its own so that it and its helpers can be signalled together, with
// stdout and stderr appended to <runDir>/<host>-<name>.log and its record in
// <runDir>/pids/<host>-<name>.pid for Cleanup. It returns once the process has started;
// a goroutine reaps it while this process lives, and it keeps running after this
// process exits. Host.Start is Spawn for the process that built the lab; a later
// command (bin/lab start-speaker) spawns with the namespace its state recorded.
func Spawn(runDir, ns, host, name string, wrapper, cmd []string) (*Process, error) {
	if len(cmd) == 0 {
		return nil, errors.New("netlab Start: no command")
	}
	if !procRE.MatchString(name) {
		return nil, fmt.Errorf("netlab process name %q: want [a-zA-Z0-9._-]+, it names files", name)
	}
	p := &Process{Proc: Proc{Host: host, Name: name, Namespace: ns, Cmd: cmd,
		Log: filepath.Join(runDir, host+"-"+name+".log")}, done: make(chan struct{})}
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("netlab log for %s: %w", p.Key(), err)
	}
	defer logf.Close() // the child has its own copy
	// `ip netns exec` also gives the command a /sys showing the namespace's
	// interfaces, and then execs it, so the PID is the command's own.
	args := append(append([]string{"netns", "exec", ns}, wrapper...), cmd...)
	p.cmd = exec.Command("ip", args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(logf, "netlab: starting %q in %s at %s\n", args[3:], ns, time.Now().Format(time.RFC3339Nano))
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("netlab starting %s: %w", p.Key(), err)
	}
	p.Pid = p.cmd.Process.Pid
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	if p.pidPath, err = writePidFile(runDir, p.Proc); err != nil {
		return p, errors.Join(err, p.Kill())
	}
	return p, nil
}

// Signal sends sig to the process alone (not its group), as a kubelet stopping a
// container would; use Kill for the group.
func (p *Process) Signal(sig os.Signal) error {
	if p.Exited() {
		return fmt.Errorf("netlab process %s: already exited", p.Key())
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("netlab signalling %s: %w", p.Key(), err)
	}
	return nil
}

// Kill sends SIGKILL to the process's whole group, and does not wait.
func (p *Process) Kill() error {
	// The group outlives its leader while helpers run, and its ID cannot be reused
	// while it has members, so this is safe after the leader exited too.
	if err := unix.Kill(-p.Pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("netlab killing %s: %w", p.Key(), err)
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
		return fmt.Errorf("netlab process %s (pid %d) survived SIGKILL for %s", p.Key(), p.Pid, timeout)
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
		if p.Key() == full && !p.Exited() {
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
		if r, err := readPidFile(p.pidPath); err == nil && r.Pid == p.Pid {
			_ = os.Remove(p.pidPath)
		}
	})
}
