package netlab_test

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
)

var (
	subnet  = netip.MustParsePrefix("172.18.0.0/16")
	subnet6 = netip.MustParsePrefix("fc00:f853:ccd:e793::/64")
)

// newLab builds a lab for one test (labtest.NewNet). Each test has its own prefix, so
// none can remove another's namespaces.
func newLab(t *testing.T, prefix string) *netlab.Lab { return labtest.NewNet(t, prefix, subnet) }

func addHost(t *testing.T, l *netlab.Lab, name, addr string) *netlab.Host {
	t.Helper()
	return labtest.AddHost(t, l, name, netip.MustParseAddr(addr))
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
