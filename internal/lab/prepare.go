package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"herald.dev/herald/internal/lab/netlab"
)

// checkNoLab refuses to build over namespaces of the prefix: they are a lab that is up,
// or what a crashed one left, and Down removes either.
func checkNoLab(prefix string) error {
	if ns := labNamespaces(prefix); len(ns) > 0 {
		return fmt.Errorf("lab: namespaces %s exist: a lab with prefix %q is up (see `hack/lab status`) or was left behind; `hack/lab down` removes it", strings.Join(ns, " "), prefix)
	}
	return nil
}

// labNamespaces lists the network namespaces of a lab with this prefix
// (netlab.Namespaces), none when they cannot be listed: its callers only report them.
func labNamespaces(prefix string) []string {
	ns, _ := netlab.Namespaces(prefix)
	return ns
}

// resetRunDir removes what an earlier lab left in the run directory (state, logs,
// kubeconfigs, pid files, pod records, the mounted memberlist Secrets, the control
// plane's files) and keeps the binaries, which Up rebuilds only as far as they
// changed. A Secret volume left by an earlier lab would give a speaker that starts
// before its agent writes the new one the earlier lab's key.
func resetRunDir(runDir string) error {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fmt.Errorf("lab run directory: %w", err)
	}
	logs, _ := filepath.Glob(filepath.Join(runDir, "*.log"))
	kubeconfigs, _ := filepath.Glob(filepath.Join(runDir, "*.kubeconfig"))
	old := append(append(logs, kubeconfigs...), filepath.Join(runDir, stateFile), filepath.Join(runDir, "pids"), filepath.Join(runDir, speakerStateDir),
		filepath.Join(runDir, "agents"), filepath.Join(runDir, "memberlist"), filepath.Join(runDir, CPHost+"-controlplane"))
	for _, p := range old {
		if err := os.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("lab run directory: %w", err)
		}
	}
	return nil
}

// resolveAssets finds etcd, kube-apiserver, kube-controller-manager and kubectl: the
// directory given, else $KUBEBUILDER_ASSETS, else hack/setup-test-binaries.sh's, which
// builds them when missing (minutes on a cold Go cache) and prints the directory.
func resolveAssets(ctx context.Context, root, dir string, log io.Writer) (string, error) {
	if dir == "" {
		dir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if dir == "" {
		cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "setup-test-binaries.sh"))
		cmd.Dir, cmd.Stderr = root, log
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("lab: hack/setup-test-binaries.sh: %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	if err := netlab.CheckAssets(dir, "etcd", "kube-apiserver", "kube-controller-manager", "kubectl"); err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	return dir, nil
}
