package members

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herald.dev/herald/internal/memberkey"
)

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	val, _ := memberkey.New()
	if err := os.WriteFile(good, append(val, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	want, _ := memberkey.FromSecretData(map[string][]byte{memberkey.DataKey: val})

	c := DefaultConfig()
	c.KeyFile = filepath.Join(dir, "missing")
	if err := c.LoadKey(); err == nil || !strings.Contains(err.Error(), c.KeyFile) {
		t.Errorf("LoadKey(missing) = %v, want an error naming the path", err)
	}
	c.KeyFile = good
	if err := c.LoadKey(); err != nil || !bytes.Equal(c.SecretKey, want) {
		t.Errorf("LoadKey(good) = %v, key %x", err, c.SecretKey)
	}
	c.KeyFile = ""
	c.SecretKey = nil
	if err := c.LoadKey(); err == nil {
		t.Error("LoadKey with no path succeeded")
	}
}

// TestLoadKeyring reads the keys next to the mounted secretkey file.
func TestLoadKeyring(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(memberkey.DataKey, "old-key-material-0123")
	write(memberkey.DataKey+".new", "new-key-material-0123")
	write(memberkey.PrimaryEntry, memberkey.DataKey+".new")
	c := DefaultConfig()
	c.KeyFile = filepath.Join(dir, memberkey.DataKey)
	if err := c.LoadKey(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.SecretKey, mustKey("new-key-material-0123")) || len(c.OtherKeys) != 1 || !bytes.Equal(c.OtherKeys[0], mustKey("old-key-material-0123")) {
		t.Fatalf("primary %x, others %x: want the new key primary and the old accepted", c.SecretKey, c.OtherKeys)
	}
}
