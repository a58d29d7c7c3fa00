package netlab_test

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/internal/lab/netlab"
)

var (
	subnet  = netip.MustParsePrefix("172.18.0.0/16")
	subnet6 = netip.MustParsePrefix("fc00:f853:ccd:e793::/64")
)

// newLab builds a lab for one test, first clearing what a crashed run of the same test
// left, and closes it when the test ends, checking that no namespace of it remains.
// Each test has its own prefix, so none can remove another's namespaces.
func newLab(t *testing.T, prefix string) *netlab.Lab {
	t.Helper()
	if err := netlab.Check(); err != nil {
		t.Fatal(err) // not Skip: a lab test that skips passes where it never ran
	}
	if err := netlab.Cleanup(prefix, ""); err != nil {
		t.Fatalf("leftovers of an earlier run: %v", err)
	}
	l, err := netlab.New(prefix, subnet, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if left := labNamespaces(t, prefix); len(left) > 0 {
			t.Errorf("namespaces left after Close: %v", left)
		}
	})
	return l
}

func addHost(t *testing.T, l *netlab.Lab, name, addr string) *netlab.Host {
	t.Helper()
	h, err := l.AddHost(name, netip.MustParseAddr(addr))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// labNamespaces lists the namespaces whose names start with prefix.
func labNamespaces(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := runIP("netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			found = append(found, f[0])
		}
	}
	return found
}

// ping tries up to three echoes of one second each: on a loaded machine the first
// IPv6 neighbour solicitation can be lost while a fresh bridge port settles, and a
// reachable host must not fail the test for that. An unreachable one still fails.
func ping(h *netlab.Host, dst netip.Addr) error {
	var err error
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = h.Ping(ctx, dst)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

func runIP(args ...string) ([]byte, error) { return exec.Command("ip", args...).CombinedOutput() }
