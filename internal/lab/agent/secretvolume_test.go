package agent

import (
	"os"
	"path/filepath"
	"testing"

	"herald.dev/herald/internal/memberkey"
)

// TestWriteVolume mounts three versions of a memberlist Secret as the agent does and
// reads each as the speaker does.
func TestWriteVolume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "memberlist")
	a, b := []byte("key-material-aaaaaaaa"), []byte("key-material-bbbbbbbb")
	for _, step := range []struct {
		data    map[string][]byte
		primary string
		keys    int
	}{
		{map[string][]byte{memberkey.DataKey: a}, memberkey.DataKey, 1},
		{map[string][]byte{memberkey.DataKey: a, "secretkey.b": b, memberkey.PrimaryEntry: []byte("secretkey.b")}, "secretkey.b", 2},
		{map[string][]byte{"secretkey.b": b, memberkey.PrimaryEntry: []byte("secretkey.b")}, "secretkey.b", 1},
	} {
		if err := writeVolume(dir, step.data); err != nil {
			t.Fatal(err)
		}
		ring, err := memberkey.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ring) != step.keys || ring[0].Name != step.primary {
			t.Fatalf("read %v, want %d keys, %s primary", ring, step.keys, step.primary)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, memberkey.DataKey)); !os.IsNotExist(err) {
		t.Errorf("the removed entry's link is still there: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 { // ..data, its version, secretkey.b, primary
		t.Errorf("%d entries left, want 4: %v", len(entries), entries)
	}
}
