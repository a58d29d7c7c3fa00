package lab

import (
	"os"
	"path/filepath"
	"testing"
)

// An earlier lab's mounted memberlist Secret must not outlive it: a speaker of the next
// lab starting before its agent writes the new Secret would read the old key and be
// cut off from its peers.
func TestResetRunDirForgetsTheEarlierLab(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(memberlistDir(dir, "worker"), "secretkey")
	binary := filepath.Join(dir, "herald")
	for _, p := range []string{stale, binary, filepath.Join(agentDir(dir, "worker"), "pods")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := resetRunDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the earlier lab's memberlist Secret is still mounted: %v", err)
	}
	if _, err := os.Stat(agentDir(dir, "worker")); !os.IsNotExist(err) {
		t.Errorf("the earlier lab's pod records remain: %v", err)
	}
	if _, err := os.Stat(binary); err != nil {
		t.Errorf("the built binary went: %v", err)
	}
}
