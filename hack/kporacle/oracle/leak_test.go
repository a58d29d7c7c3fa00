//go:build linux

package oracle

import (
	"os"
	"testing"
)

// NewProxier opens a netlink socket to probe nfacct; New must close it.
func TestNewLeaksNoFileDescriptors(t *testing.T) {
	count := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return len(entries)
	}
	newOracle(t, workedExampleOptions()) // warm up lazily opened files
	before := count()
	for range 20 {
		newOracle(t, workedExampleOptions())
	}
	if after := count(); after >= before+20 {
		t.Errorf("20 Oracles left %d more open file descriptors", after-before)
	}
}
