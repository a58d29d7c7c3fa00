package claims

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// stateFile is where the speaker of node keeps its claims across a restart; the
// name carries the node so that speakers sharing a directory (the lab) do not mix.
func stateFile(dir, node string) string { return filepath.Join(dir, "claims-"+node) }

// Save writes c for the next speaker of this node, in dir (a hostPath in the
// DaemonSet; "": nowhere).
func Save(dir, node string, c Set) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	path := stateFile(dir, node)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, c.Encode(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Touch marks the claims in dir as current: a speaker killed without a word (SIGKILL,
// OOM) leaves claims as old as its last Touch, which Load measures against its maxAge.
// No file (nothing saved yet, or dir ""): nothing to do.
func Touch(dir, node string, now time.Time) error {
	if dir == "" {
		return nil
	}
	err := os.Chtimes(stateFile(dir, node), now, now)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("touching the claims in %s: %w", dir, err)
	}
	return nil
}

// Load reads the claims the previous speaker of this node saved, if it saved or
// touched them less than maxAge ago; none otherwise (a reboot, a speaker stopped long
// ago). The file is removed: the claims are good for one start.
func Load(dir, node string, maxAge time.Duration, now time.Time) (Set, error) {
	if dir == "" || maxAge <= 0 {
		return nil, nil
	}
	path := stateFile(dir, node)
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer os.Remove(path)
	if now.Sub(fi.ModTime()) > maxAge {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	c, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return c, nil
}
