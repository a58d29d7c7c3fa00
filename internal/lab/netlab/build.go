package netlab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Build compiles the main package pkg (relative to the repository root, like
// "./hack/controlplane") into the run directory, once per lab, and returns the binary's
// path. The repository is the module `go env GOMOD` finds from the working directory.
func (l *Lab) Build(ctx context.Context, pkg string) (string, error) {
	l.mu.Lock()
	bin, ok := l.built[pkg]
	l.mu.Unlock()
	if ok {
		return bin, nil
	}
	root, err := RepoRoot(ctx)
	if err != nil {
		return "", err
	}
	bin = filepath.Join(l.runDir, path.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("netlab building %s: %w: %s", pkg, err, strings.TrimSpace(string(out)))
	}
	l.mu.Lock()
	l.built[pkg] = bin
	l.mu.Unlock()
	return bin, nil
}

// RepoRoot is the directory of the main module's go.mod, as `go env GOMOD` reports it
// from the working directory.
func RepoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("netlab: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == "/dev/null" {
		return "", errors.New("netlab: not inside a Go module; run from the herald repository")
	}
	return filepath.Dir(mod), nil
}
