package netlab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// pidDir, under a lab's run directory, records the processes the lab started, so that
// Cleanup can stop them after the test that started them crashed.
const pidDir = "pids"

func writePidFile(runDir string, p Proc) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(runDir, pidDir), 0o755); err != nil {
		return "", fmt.Errorf("netlab pid file: %w", err)
	}
	path := filepath.Join(runDir, pidDir, p.Key()+".pid")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("netlab pid file: %w", err)
	}
	return path, nil
}

func readPidFile(path string) (Proc, error) {
	var p Proc
	b, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("netlab pid file: %w", err)
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &p); err != nil || p.Pid <= 1 {
		return p, fmt.Errorf("netlab pid file %s: unreadable (%v), left alone", path, err)
	}
	return p, nil
}

// killRecorded SIGKILLs the processes recorded in runDir/pids that still run what was
// recorded, with their groups, and removes the pid files.
func killRecorded(runDir string) error {
	files, err := filepath.Glob(filepath.Join(runDir, pidDir, "*.pid"))
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		p, err := readPidFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if p.Alive() {
			if err := p.killGroup(); err != nil {
				errs = append(errs, fmt.Errorf("%w (recorded in %s)", err, f))
				continue
			}
		}
		if err := os.Remove(f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
