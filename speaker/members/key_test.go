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
