package app

import (
	"bytes"
	"strings"
	"testing"
)

func run(args ...string) (string, error) {
	cmd := NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestVersion(t *testing.T) {
	out, err := run("version")
	if err != nil || !strings.HasPrefix(out, "herald ") {
		t.Errorf("herald version = %q, %v", out, err)
	}
}

func TestControllerFlagsDocumented(t *testing.T) {
	out, err := run("controller", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--lb-class", "--namespace", "--leader-elect", "--metrics-bind-address", "--metrics-secure", "--metrics-cert-dir", "--kubeconfig"} {
		if !strings.Contains(out, flag) {
			t.Errorf("controller --help lacks %s", flag)
		}
	}
}

func TestControllerBadKubeconfigIsAClearError(t *testing.T) {
	_, err := run("controller", "--kubeconfig", "/nonexistent/kubeconfig", "--leader-elect=false")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("err = %v, want one naming the kubeconfig", err)
	}
}
