package manifests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubectlBin returns the kubectl of hack/setup-test-binaries.sh, failing the test
// (never skipping) when it is missing.
func kubectlBin(t testing.TB) string {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is unset: run `make test`, or export KUBEBUILDER_ASSETS=$(hack/setup-test-binaries.sh)")
	}
	bin := filepath.Join(assets, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("KUBEBUILDER_ASSETS=%s lacks kubectl: run hack/setup-test-binaries.sh", assets)
	}
	return bin
}

// kustomize renders a kustomization directory of the repository.
func kustomize(t testing.TB, dir string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin(t), "kustomize", repoPath(dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return out
}

// TestRenderedManifestIsCurrent: config/manifests/herald.yaml is config/default
// rendered (after its header comment), as `make render` writes it.
func TestRenderedManifestIsCurrent(t *testing.T) {
	want := kustomize(t, "config/default")
	data, err := os.ReadFile(repoPath(rendered))
	if err != nil {
		t.Fatal(err)
	}
	body := data
	for bytes.HasPrefix(body, []byte("#")) {
		_, body, _ = bytes.Cut(body, []byte("\n"))
	}
	if !bytes.Equal(body, want) {
		t.Fatalf("%s is not what config/default renders: run `make render` (and commit the result)", rendered)
	}
}

// TestOverlaysRender: every kustomization under config/ renders, and the kind overlay
// only adds to the default one.
func TestOverlaysRender(t *testing.T) {
	for _, dir := range []string{"config/crd", "config/namespace", "config/controller", "config/speaker", "config/metrics-reader", "config/user-roles", "config/samples", "config/prometheus", "config/grafana", "config/kind"} {
		if len(kustomize(t, dir)) == 0 {
			t.Errorf("%s renders nothing", dir)
		}
	}
	kind := string(kustomize(t, "config/kind"))
	if !strings.Contains(kind, "--cluster-cidr=10.10.0.0/16") {
		t.Errorf("config/kind does not give the speakers the walkthrough's pod subnet")
	}
}
