// Command controlplane runs a local Kubernetes control plane (etcd, kube-apiserver and
// kube-controller-manager built by hack/setup-test-binaries.sh), writes an admin
// kubeconfig and runs until SIGINT/SIGTERM. The lab (internal/lab and its netlab, so
// `make demo` and the end-to-end tests) runs it. It installs nothing of herald's: whoever
// uses it applies herald's CRDs and RBAC from config/manifests/herald.yaml
// (lab.InstallManifest), the one source of them.
//
// kube-apiserver serves on loopback unless --bind-address says otherwise: the lab runs
// this command inside a network namespace of its own (`ip netns exec hl-cp controlplane
// --bind-address 172.18.0.2 --secure-port 6443`), where the nodes reach it over the
// lab's bridge, as kind's nodes reach their control-plane container. The kubeconfig then
// points at that address, and kube-controller-manager connects through it too.
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"herald.dev/herald/internal/testenv"
)

func main() {
	dir := flag.String("dir", ".run/demo", "directory for the kubeconfig and logs")
	assets := flag.String("assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory with etcd, kube-apiserver and kube-controller-manager")
	bind := flag.String("bind-address", "", "address kube-apiserver serves on and advertises (default: loopback)")
	port := flag.Uint("secure-port", 0, "kube-apiserver's port with --bind-address (default: a free one)")
	// The walkthrough's kind cluster uses serviceSubnet 10.200.1.0/24.
	serviceCIDRs := flag.String("service-cluster-ip-range", "10.200.1.0/24", "kube-apiserver's ClusterIP ranges, one per family, comma-separated (dual-stack: 10.200.1.0/24,fd00:10:96::/112)")
	flag.Parse()
	opts, err := serveOn(*bind, *port)
	if err == nil {
		err = run(*dir, *assets, *serviceCIDRs, opts...)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
}

// serveOn turns the flags into testenv options; without --bind-address there are none,
// so the control plane is exactly the loopback one it always was.
func serveOn(bind string, port uint) ([]testenv.Option, error) {
	if bind == "" {
		if port != 0 {
			return nil, fmt.Errorf("--secure-port needs --bind-address")
		}
		return nil, nil
	}
	addr, err := netip.ParseAddr(bind)
	if err != nil {
		return nil, fmt.Errorf("--bind-address: %w", err)
	}
	if port > 65535 {
		return nil, fmt.Errorf("--secure-port %d is not a port", port)
	}
	if port == 0 {
		p, err := testenv.FreePort(addr)
		if err != nil {
			return nil, err
		}
		port = uint(p)
	}
	return []testenv.Option{testenv.ServeOn(netip.AddrPortFrom(addr, uint16(port)))}, nil
}

func run(dir, assets, serviceCIDRs string, opts ...testenv.Option) error {
	if assets == "" {
		return fmt.Errorf("no binaries: pass --assets or set KUBEBUILDER_ASSETS (hack/setup-test-binaries.sh prints the directory)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	state, err := testenv.StateIn(dir)
	if err != nil {
		return err
	}
	env := testenv.Environment(assets, serviceCIDRs, append(opts, testenv.NoCRDs(), state)...)
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
	// namespaces, EndpointSlices), so the local cluster behaves like a real one. That
	// includes the node lifecycle controller with Kubernetes' defaults: a node whose
	// Lease goes unrenewed for 50 s (--node-monitor-grace-period, checked every 5 s) goes
	// Ready=Unknown, its pods not ready, and tainted unreachable; pods tolerate that for
	// 300 s (the DefaultTolerationSeconds admission plugin) before they are evicted. The
	// lab's agents renew their nodes' Leases as kubelets do. Pod CIDRs are the lab's
	// (no node IPAM), and there is no cloud.
	kcm := exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+path, "--leader-elect=false", "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller",
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

	// The log says which signal ended it and when: a lab whose control plane stops
	// before its teardown needs that to be explained.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	sig := <-sigs
	fmt.Printf("control plane stopping on %v at %s (parent pid %d)\n", sig, time.Now().Format(time.RFC3339Nano), os.Getppid())
	return nil
}
