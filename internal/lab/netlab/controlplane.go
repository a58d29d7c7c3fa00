package netlab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// APIServerPort is where the lab's kube-apiserver listens, as in a kind node.
const APIServerPort = 6443

// controlPlaneTimeout bounds building and starting the control plane when the caller's
// context has no deadline; etcd and kube-apiserver take 10-30 s on two cores.
const controlPlaneTimeout = 3 * time.Minute

// ControlPlane is etcd, kube-apiserver and kube-controller-manager (hack/controlplane)
// running in a host's namespace and serving on the host's address. It holds nothing of
// herald's: lab.InstallManifest applies herald's CRDs and RBAC from the manifest.
type ControlPlane struct {
	Host       *Host
	Process    *Process
	Dir        string       // the control plane's directory: kubeconfig, logs, ready file
	Kubeconfig string       // admin kubeconfig; its server is https://<host address>:6443
	Config     *rest.Config // the kubeconfig's, dialling through Host.DialContext
}

// StartControlPlane builds hack/controlplane into the run directory (once per lab),
// starts it in host's namespace serving on host.Addr():6443 with the binaries in
// assetsDir (KUBEBUILDER_ASSETS), and waits until it is ready. The repository is found
// with `go env GOMOD` from the working directory, which works from any package's test.
// Lab.Close stops it. serviceCIDRs are kube-apiserver's --service-cluster-ip-range (one
// per family, the primary first); none means hack/controlplane's default, the
// walkthrough's 10.200.1.0/24.
//
// Inside the lab the kubeconfig works as it is (the nodes reach the host over the
// bridge); Config serves a go test in the root namespace, which cannot route there.
func StartControlPlane(ctx context.Context, host *Host, assetsDir string, serviceCIDRs ...netip.Prefix) (*ControlPlane, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, controlPlaneTimeout)
		defer cancel()
	}
	if err := CheckAssets(assetsDir, "etcd", "kube-apiserver", "kube-controller-manager"); err != nil {
		return nil, fmt.Errorf("netlab control plane: %w", err)
	}
	bin, err := host.lab.Build(ctx, "./hack/controlplane")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(host.lab.runDir, host.name+"-controlplane")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("netlab control plane: %w", err)
	}
	ready := filepath.Join(dir, "ready")
	if err := os.Remove(ready); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("netlab control plane: stale ready file: %w", err)
	}
	args := []string{"--dir", dir, "--assets", assetsDir,
		"--bind-address", host.addr.String(), "--secure-port", strconv.Itoa(APIServerPort)}
	if len(serviceCIDRs) > 0 {
		cidrs := make([]string, len(serviceCIDRs))
		for i, c := range serviceCIDRs {
			cidrs[i] = c.String()
		}
		args = append(args, "--service-cluster-ip-range", strings.Join(cidrs, ","))
	}
	p, err := host.Start("controlplane", append([]string{bin}, args...)...)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, p, ready); err != nil {
		return nil, errors.Join(err, p.Stop(stopTimeout))
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg, err := restConfig(kubeconfig, host)
	if err != nil {
		return nil, errors.Join(err, p.Stop(stopTimeout))
	}
	return &ControlPlane{Host: host, Process: p, Dir: dir, Kubeconfig: kubeconfig, Config: cfg}, nil
}

// RESTConfigVia returns the control plane's admin config dialling through another host
// of the lab, which shows that the API is reachable over the bridge, as a node sees it.
func (cp *ControlPlane) RESTConfigVia(h *Host) (*rest.Config, error) {
	return restConfig(cp.Kubeconfig, h)
}

func restConfig(kubeconfig string, h *Host) (*rest.Config, error) {
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("netlab control plane kubeconfig: %w", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return nil, fmt.Errorf("netlab control plane kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.Dial = h.DialContext
	return cfg, nil
}

// waitReady waits for the control plane's ready file, failing early with its log's tail
// if it exits first.
func waitReady(ctx context.Context, p *Process, ready string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(ready); err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("netlab control plane exited before it was ready (%v); %s ends:\n%s", p.err, p.Log, LogTail(p.Log, 20))
		case <-ctx.Done():
			return fmt.Errorf("netlab control plane not ready: %w; %s ends:\n%s", ctx.Err(), p.Log, LogTail(p.Log, 20))
		case <-tick.C:
		}
	}
}

// APIServer is the address kube-apiserver serves on.
func (cp *ControlPlane) APIServer() netip.AddrPort {
	return netip.AddrPortFrom(cp.Host.addr, APIServerPort)
}
