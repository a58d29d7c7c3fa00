package labtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"herald.dev/herald/internal/lab/netlab"
)

// packages names the Debian package of each command the lab tests run.
var packages = map[string]string{
	"arping":    "arping",
	"conntrack": "conntrack",
	"ip":        "iproute2",
}

// debianPackage names the Debian package that installs command.
func debianPackage(command string) string {
	if p, ok := packages[command]; ok {
		return p
	}
	if strings.HasPrefix(command, "iptables") || strings.HasPrefix(command, "ip6tables") {
		return "iptables"
	}
	return "?"
}

// Require fails the test unless it may build network namespaces (root, `ip netns`) and
// finds the commands named, saying what is missing: a lab test that skipped would pass
// on every machine that cannot run it.
func Require(tb testing.TB, commands ...string) {
	tb.Helper()
	if err := netlab.Check(); err != nil {
		tb.Fatalf("%s needs the network-namespace lab: %v", tb.Name(), err)
	}
	for _, c := range commands {
		if _, err := exec.LookPath(c); err != nil {
			tb.Fatalf("%s needs the command %s (Debian package %s): %v", tb.Name(), c, debianPackage(c), err)
		}
	}
}

// Assets is Require plus the directory of the control plane's binaries
// (KUBEBUILDER_ASSETS).
func Assets(tb testing.TB) string {
	tb.Helper()
	Require(tb)
	dir, err := netlab.Assets()
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// RunDir is where the lab of a test keeps its logs, binaries and pid files: kept after
// the test, for reading its logs, and emptied when the test runs again.
func RunDir(tb testing.TB, prefix string) string {
	return filepath.Join(os.TempDir(), "herald-lab", prefix+tb.Name())
}
