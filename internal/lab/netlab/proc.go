package netlab

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Proc is a long-running process of a lab as its pid file and the lab's state record
// it, so that any later process (a `bin/lab` command, Cleanup after a crash) can act on
// it. Its PID alone could by now name a stranger, so every use first checks that the
// process still runs Cmd.
type Proc struct {
	Host      string   `json:"host"`
	Name      string   `json:"name"`
	Pid       int      `json:"pid"`
	Namespace string   `json:"namespace"`
	Cmd       []string `json:"cmd"` // what it runs once started, after any wrapper exec'd it
	Log       string   `json:"log"`
}

// Key names the process as its log and pid file are named: <host>-<name>.
func (p Proc) Key() string { return p.Host + "-" + p.Name }

// Alive reports whether the process runs and is still the one recorded: its command line
// ends with Cmd (it may still be `ip netns exec NS` or a wrapper about to exec Cmd), and
// it is not a zombie waiting to be reaped.
func (p Proc) Alive() bool {
	if p.Pid <= 1 || len(p.Cmd) == 0 {
		return false
	}
	st, ok := readProcStat(p.Pid)
	if !ok || st.zombie {
		return false
	}
	raw, err := readCmdline(p.Pid)
	if err != nil {
		return false
	}
	if len(raw) == 0 {
		// Reads empty while the process execs (ip netns exec, nsenter): still ours,
		// unless a kernel thread (a child of kthreadd, PID 2) took the PID.
		return st.ppid != 2
	}
	got := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	return len(got) >= len(p.Cmd) && slices.Equal(got[len(got)-len(p.Cmd):], p.Cmd)
}

// cmdlineMax bounds the command lines readCmdline reads whole; the lab's are far shorter.
const cmdlineMax = 64 << 10

// readCmdline reads /proc/PID/cmdline in a single read(2). The kernel answers one read
// from one address space, but a process that execs between two reads (`ip netns exec`
// becoming its command) would give a torn line of both, which matches neither: a
// running process read as a stranger.
func readCmdline(pid int) ([]byte, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, cmdlineMax)
	n, err := f.Read(buf)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if n == len(buf) {
		return nil, fmt.Errorf("netlab: the command line of pid %d is longer than %d bytes", pid, cmdlineMax)
	}
	return buf[:n], nil
}

type procStat struct {
	zombie bool
	ppid   int
}

// readProcStat reads the state and parent of a process from /proc/PID/stat, whose
// fields follow the parenthesised command name (which may itself contain ") ").
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	return parseProcStat(b)
}

func parseProcStat(b []byte) (procStat, bool) {
	s := string(b)
	i := strings.LastIndex(s, ") ")
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 2 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return procStat{zombie: f[0] == "Z", ppid: ppid}, true
}

// Signal sends sig to the process alone, as a kubelet stopping a container would.
func (p Proc) Signal(sig syscall.Signal) error {
	if !p.Alive() {
		return fmt.Errorf("lab: %s (pid %d) is not running", p.Key(), p.Pid)
	}
	if err := unix.Kill(p.Pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("lab: signalling %s (pid %d): %w", p.Key(), p.Pid, err)
	}
	return nil
}

// Kill sends SIGKILL to the process's group: the lab starts each process as the leader
// of a group of its own, so this takes its helpers too.
func (p Proc) Kill() error {
	if !p.Alive() {
		return fmt.Errorf("lab: %s (pid %d) is not running", p.Key(), p.Pid)
	}
	return p.killGroup()
}

// killGroup kills the group the process leads, or the process alone if it leads none.
func (p Proc) killGroup() error {
	target := p.Pid
	if pgid, err := unix.Getpgid(p.Pid); err == nil && pgid == p.Pid {
		target = -p.Pid
	}
	if err := unix.Kill(target, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("lab: killing %s (pid %d): %w", p.Key(), p.Pid, err)
	}
	return nil
}

// gone reports whether nothing is left of the process that could hold what it held
// (its listening ports, its raw sockets): no process has its PID any more, or only its
// zombie leader is left, or a stranger reused the PID. A Go program's leader thread may
// exit before its other threads, which still hold its files: it reads as a zombie
// meanwhile, so gone also waits for the threads.
func (p Proc) gone() bool {
	st, ok := readProcStat(p.Pid)
	if !ok {
		return true
	}
	if st.zombie {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.Pid))
		return err != nil || len(tasks) <= 1
	}
	return !p.Alive()
}

// WaitGone waits until nothing is left of the process, up to limit.
func (p Proc) WaitGone(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for !p.gone() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// Stop asks the process to end with SIGTERM and kills its group after timeout.
func (p Proc) Stop(timeout time.Duration) error {
	if p.Alive() {
		if err := p.Signal(unix.SIGTERM); err != nil {
			return err
		}
	}
	return p.AwaitExit(timeout)
}

// AwaitExit waits for a process asked to stop, and kills its group after timeout. It
// never signals twice: a second SIGTERM could end the control plane half-way through
// its own shutdown, before it removed etcd's and kube-apiserver's directories.
func (p Proc) AwaitExit(timeout time.Duration) error {
	if p.WaitGone(timeout) {
		return nil
	}
	// Not gone means the PID is still the process's, running or exiting: safe to kill.
	if err := p.killGroup(); err != nil {
		return err
	}
	if !p.WaitGone(timeout) {
		return fmt.Errorf("lab: %s (pid %d) survived SIGKILL for %v", p.Key(), p.Pid, timeout)
	}
	return nil
}
