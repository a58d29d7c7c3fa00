package handover

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// stateFile is where the forwarder of node keeps its forwardings for the next speaker
// of the node; the name carries the node so that speakers sharing a directory (the lab)
// do not mix.
func stateFile(dir, node string) string { return filepath.Join(dir, "handovers-"+node) }

// saveForwards writes fs to dir ("": nowhere), replacing what was there.
func saveForwards(dir, node string, fs []Forward) error {
	if dir == "" {
		return nil
	}
	b, err := json.Marshal(fs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	path := stateFile(dir, node)
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// loadForwards reads the forwardings the previous speaker of node saved in dir whose
// drain period has not ended at now.
func loadForwards(dir, node string, now time.Time) ([]Forward, error) {
	if dir == "" {
		return nil, nil
	}
	b, err := os.ReadFile(stateFile(dir, node))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the handovers a previous speaker left: %w", err)
	}
	var all []Forward
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("reading %s: %w", stateFile(dir, node), err)
	}
	var out []Forward
	for _, f := range all {
		if f.IP.IsValid() && f.To.IsValid() && f.IP.Is4() == f.To.Is4() && now.Before(f.Until) {
			out = append(out, f)
		}
	}
	return out, nil
}
