// Command controlplane runs a local Kubernetes control plane (etcd, kube-apiserver and
// kube-controller-manager built by hack/setup-test-binaries.sh) on loopback with
// herald's CRDs installed, writes an admin kubeconfig and runs until SIGINT/SIGTERM.
// `make demo` uses it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"herald.dev/herald/internal/testenv"
)

func main() {
	dir := flag.String("dir", ".run/demo", "directory for the kubeconfig and logs")
	assets := flag.String("assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory with etcd, kube-apiserver and kube-controller-manager")
	flag.Parse()
	if err := run(*dir, *assets); err != nil {
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
}

func run(dir, assets string) error {
	if assets == "" {
		return fmt.Errorf("no binaries: pass --assets or set KUBEBUILDER_ASSETS (hack/setup-test-binaries.sh prints the directory)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The walkthrough's kind cluster uses serviceSubnet 10.200.1.0/24.
	env := testenv.Environment(assets, "10.200.1.0/24")
	if _, err := env.Start(); err != nil {
		_ = env.Stop() // Start may fail after launching the processes
		return fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	defer env.Stop() //nolint:errcheck // best effort on the way out

	user, err := env.ControlPlane.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "kubeconfig")
	if _, err := clientcmd.Load(kubeconfig); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}

	// kube-controller-manager runs the controllers a cluster has (ServiceAccounts,
	// namespaces, EndpointSlices), so the local cluster behaves like a real one.
	kcm := exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+path, "--leader-elect=false", "--controllers=*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-service-lb-controller",
		"--use-service-account-credentials=false", "--bind-address=127.0.0.1", "--secure-port=0")
	logf, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	kcm.Stdout, kcm.Stderr = logf, logf
	// Write the kubeconfig before starting the controller manager, which reads it.
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return err
	}
	if err := kcm.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	defer func() { _ = kcm.Process.Kill(); _ = kcm.Wait() }()
	if err := os.WriteFile(filepath.Join(dir, "ready"), []byte("ok\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("control plane up: export KUBECONFIG=%s\n", path)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}
