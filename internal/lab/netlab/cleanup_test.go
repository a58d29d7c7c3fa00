package netlab_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
)

// TestCleanupRemovesLeftovers plays a crashed run: a lab is built and a process started,
// but Close never runs.
func TestCleanupRemovesLeftovers(t *testing.T) {
	const prefix = "nl-c-"
	l, runDir, _, p := crashedLab(t, prefix)
	pidFile := filepath.Join(runDir, "pids", "w1-sleep.pid")
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("no pid file: %v", err)
	}
	// A namespace of another lab whose prefix starts like this one must survive.
	other, err := netlab.New("nl-c-o-", subnet, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })

	if err := netlab.Cleanup(prefix, runDir); err != nil {
		t.Fatal(err)
	}
	if left := labNamespaces(t, prefix); !sameSet(left, []string{"nl-c-o-br"}) {
		t.Fatalf("namespaces after Cleanup: %v, want only the other lab's nl-c-o-br", left)
	}
	if err := p.Wait(); err == nil {
		t.Fatal("the process exited cleanly, want it killed")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(p.Pid)); err == nil {
		t.Fatalf("pid %d still exists", p.Pid)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Fatalf("pid file still there: %v", err)
	}
	// The abandoned Lab's Close finds nothing left to do, and says nothing about it.
	if err := l.Close(); err != nil {
		t.Fatalf("Close after Cleanup: %v", err)
	}
}

func TestCleanupLeavesStrangersAlone(t *testing.T) {
	labtest.Require(t)
	runDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(runDir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A pid file naming this very test process with another command line: the PID was
	// "reused", so Cleanup must not kill it (it would kill the test).
	rec := `{"pid":` + strconv.Itoa(os.Getpid()) + `,"host":"w1","name":"sleep","namespace":"nl-g-w1","cmd":["sleep","300"]}`
	if err := os.WriteFile(filepath.Join(runDir, "pids", "w1-sleep.pid"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := netlab.Cleanup("nl-g-", runDir); err != nil {
		t.Fatal(err)
	}
	// Still alive, evidently.
}

// TestCleanupKillsRecordedProcesses covers a process whose namespace is gone already
// (deleted while it ran): only its pid file leads to it.
func TestCleanupKillsRecordedProcesses(t *testing.T) {
	const prefix = "nl-r-"
	_, runDir, h, p := crashedLab(t, prefix)
	if out, err := runIP("netns", "delete", h.Namespace()); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := netlab.Cleanup(prefix, runDir); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the recorded process survived Cleanup")
	}
}

// crashedLab builds a lab with a host w1 running "sleep 300" as process sleep, for a
// test to play a crash with: it is closed only if the test fails before doing so.
func crashedLab(t *testing.T, prefix string) (*netlab.Lab, string, *netlab.Host, *netlab.Process) {
	t.Helper()
	labtest.Require(t)
	runDir := t.TempDir()
	if err := netlab.Cleanup(prefix, runDir); err != nil {
		t.Fatal(err)
	}
	l, err := netlab.New(prefix, subnet, runDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	h := addHost(t, l, "w1", "172.18.0.3")
	p, err := h.Start("sleep", "sleep", "300")
	if err != nil {
		t.Fatal(err)
	}
	return l, runDir, h, p
}
