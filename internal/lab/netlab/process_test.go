package netlab_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herald.dev/herald/internal/testkit"
)

func TestProcessKilledIsGone(t *testing.T) {
	l := newLab(t, "nl-k-")
	h := addHost(t, l, "w1", "172.18.0.3")
	// A shell with a child, so that Kill must reach the whole group.
	p, err := h.Start("sleeper", "sh", "-c", "sleep 300 & wait")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "the shell's child", testkit.Holds(
		func() bool { return len(children(p.Pid)) > 0 }, func() string { return "no child" }))
	child := children(p.Pid)[0]
	if p.Exited() {
		t.Fatal("exited at once")
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := p.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Wait = %v, want killed by SIGKILL", err)
	}
	if !p.Exited() {
		t.Fatal("Exited is false after Wait")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(p.Pid)); err == nil {
		t.Fatalf("pid %d still exists", p.Pid)
	}
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "the child to die", func() error {
		st, err := os.ReadFile("/proc/" + child + "/stat")
		if err != nil || strings.Contains(string(st), ") Z") {
			return nil
		}
		return fmt.Errorf("child %s still runs: %s", child, st)
	})
}

func TestProcessRunsInItsHostAndLogs(t *testing.T) {
	l := newLab(t, "nl-l-")
	h := addHost(t, l, "w1", "172.18.0.3")
	p, err := h.Start("addr", "ip", "-br", "addr", "show", "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p.Log, "/w1-addr.log") || !strings.Contains(string(log), "172.18.0.3/16") {
		t.Fatalf("%s:\n%s", p.Log, log)
	}
}

func TestProcessStopSendsSIGTERM(t *testing.T) {
	l := newLab(t, "nl-s-")
	h := addHost(t, l, "w1", "172.18.0.3")
	p, err := h.Start("trap", "sh", "-c", `trap 'echo got TERM; exit 0' TERM; while :; do sleep 0.05; done`)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the shell install its trap
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait = %v, want a clean exit from the trap", err)
	}
	if log, _ := os.ReadFile(p.Log); !strings.Contains(string(log), "got TERM") {
		t.Fatalf("log:\n%s", log)
	}
}

// TestAliveWhileExecing polls Alive from the moment a process is spawned, through
// `ip netns exec` becoming its command: a command line longer than one page of
// os.ReadFile's first read could be read half from ip and half from the command, and
// a lab then took its just-started speaker for dead.
func TestAliveWhileExecing(t *testing.T) {
	l := newLab(t, "nl-a-")
	h := addHost(t, l, "w1", "172.18.0.3")
	// sleep sums its arguments: 5 s, and a command line of over 512 bytes.
	cmd := append([]string{"sleep", "5"}, slices.Repeat([]string{"0"}, 300)...)
	const trials = 200
	var dead []string
	for i := range trials {
		p, err := h.Start("sleeper", cmd...)
		if err != nil {
			t.Fatal(err)
		}
		for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
			if !p.Proc.Alive() {
				dead = append(dead, fmt.Sprintf("trial %d: at %v", i, time.Since(start).Round(10*time.Microsecond)))
				break
			}
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = p.Wait()
	}
	if len(dead) > 0 {
		t.Fatalf("a running process read as not alive in %d of %d starts:\n%s", len(dead), trials, strings.Join(dead, "\n"))
	}
}

// children lists the PIDs whose parent is pid.
func children(pid int) []string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	return strings.Fields(string(b))
}
