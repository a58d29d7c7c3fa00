package netlab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ErrNotRoot is what Check returns when the process cannot create namespaces.
var ErrNotRoot = errors.New("netlab needs root (CAP_SYS_ADMIN) to create network namespaces; run the tests as root")

// Check says whether this process can build labs, in words a person running the tests
// can act on. Tests call it and fail (not skip) on error: a lab test that silently
// skipped would pass on every machine that cannot run it.
func Check() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("netlab needs the ip command (iproute2) with `ip netns`: %w", err)
	}
	if _, err := ip("netns", "list"); err != nil {
		return fmt.Errorf("netlab needs `ip netns` to work: %w", err)
	}
	return nil
}

// CheckAssets says whether dir holds the binaries named, which
// hack/setup-test-binaries.sh builds.
func CheckAssets(dir string, binaries ...string) error {
	if dir == "" {
		return errors.New("no directory of binaries: set KUBEBUILDER_ASSETS, e.g. export KUBEBUILDER_ASSETS=$(hack/setup-test-binaries.sh)")
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("%s lacks %s: run hack/setup-test-binaries.sh", dir, b)
		}
	}
	return nil
}

// Assets returns $KUBEBUILDER_ASSETS, the directory holding etcd, kube-apiserver,
// kube-controller-manager and kubectl that tests start the control plane from, or an
// error saying how to set it.
func Assets() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		return "", errors.New("KUBEBUILDER_ASSETS is unset: run `make test`, or export KUBEBUILDER_ASSETS=$(hack/setup-test-binaries.sh)")
	}
	return dir, nil
}
