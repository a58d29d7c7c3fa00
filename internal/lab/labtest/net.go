package labtest

import (
	"net/netip"
	"os"
	"testing"

	"herald.dev/herald/internal/lab/netlab"
)

// NewNet builds a lab with the given prefix (one per test or suite, so that no test
// removes another's namespaces) on subnet, first removing what a crashed run with the
// prefix left. When the test ends it closes the lab, fails the test if a namespace of
// the prefix remains, and on failure says where the logs are.
func NewNet(tb testing.TB, prefix string, subnet netip.Prefix) *netlab.Lab {
	tb.Helper()
	Require(tb)
	runDir := RunDir(tb, prefix)
	if err := os.RemoveAll(runDir); err != nil {
		tb.Fatal(err)
	}
	if err := netlab.Cleanup(prefix, runDir); err != nil {
		tb.Fatalf("removing what an earlier run left: %v", err)
	}
	l, err := netlab.New(prefix, subnet, runDir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("logs of the failed run are in %s", runDir)
		}
		if err := l.Close(); err != nil {
			tb.Errorf("closing the lab: %v", err)
		}
		if left, err := netlab.Namespaces(prefix); err != nil || len(left) > 0 {
			tb.Errorf("namespaces left after closing the lab: %v %v", left, err)
		}
	})
	return l
}

// AddHost adds a host to the lab, failing the test on error.
func AddHost(tb testing.TB, l *netlab.Lab, name string, addr netip.Addr) *netlab.Host {
	tb.Helper()
	h, err := l.AddHost(name, addr)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// Namespaces creates network namespaces by name, for tests that cable them
// themselves, and deletes them, with whatever still runs inside, when the test ends.
// A namespace of that name left by a crashed run is removed first; the names must be
// the test's own.
func Namespaces(tb testing.TB, names ...string) {
	tb.Helper()
	Require(tb)
	for _, ns := range names {
		if err := netlab.DeleteNamespace(ns); err != nil {
			tb.Fatalf("removing a leftover namespace: %v", err)
		}
		if err := netlab.AddNamespace(ns); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			if err := netlab.DeleteNamespace(ns); err != nil {
				tb.Errorf("removing namespace %s: %v", ns, err)
			}
		})
	}
}
