package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/lab/netlab"
)

// Lab is a lab as the process that built it sees it. Its processes do not depend on
// that process: they keep running after it exits, and Down (from any process) removes
// them.
type Lab struct {
	State *State
	Net   *netlab.Lab
	CP    *netlab.ControlPlane
	Kube  kubernetes.Interface // through the control plane's namespace
}

// Up builds the lab: the bridge, the control plane at 172.18.0.2 with herald's
// controller, cfg.Workers workers (a Node kept Ready by a lab agent, a herald speaker;
// herald's controller and speakers are left stopped with cfg.WithoutHerald)
// and the client at 172.18.0.100. herald's CRDs, namespace, ServiceAccounts and RBAC are
// those of config/manifests/herald.yaml, and its controller and speakers run under
// those ServiceAccounts (controller.kubeconfig, speaker.kubeconfig in the run
// directory). With cfg.DualStack every host, Node and pod has an IPv6 address too. It
// returns once every component is ready. On error it removes whatever it made.
func Up(ctx context.Context, cfg Config) (l *Lab, err error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if err := netlab.Check(); err != nil {
		return nil, err
	}
	if err := checkNoLab(cfg.Prefix); err != nil {
		return nil, err
	}
	if err := resetRunDir(cfg.RunDir); err != nil {
		return nil, err
	}
	say := func(format string, args ...any) { fmt.Fprintf(cfg.Log, "lab: "+format+"\n", args...) }
	root, err := netlab.RepoRoot(ctx)
	if err != nil {
		return nil, err
	}
	assets, err := resolveAssets(ctx, root, cfg.Assets, cfg.Log)
	if err != nil {
		return nil, err
	}
	nl, err := netlab.New(cfg.Prefix, Subnet, cfg.RunDir)
	if err != nil {
		return nil, err
	}
	l = &Lab{Net: nl, State: &State{Prefix: cfg.Prefix, RunDir: cfg.RunDir, Started: time.Now(), Assets: assets,
		KubectlBin: filepath.Join(assets, "kubectl"), Procs: map[string]netlab.Proc{}, DualStack: cfg.DualStack, Proxy: cfg.Proxy}}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Down())
			l = nil
		}
	}()
	s := l.State
	var serviceCIDRs []netip.Prefix // hack/controlplane's default: the walkthrough's
	if cfg.DualStack {
		say("dual-stack: %s and %s on the bridge, pods in %s and %s, ClusterIPs in %s and %s",
			Subnet, Subnet6, ClusterCIDR, ClusterCIDR6, ServiceCIDR, ServiceCIDR6)
		if err := nl.AddSubnet(Subnet6); err != nil {
			return l, err
		}
		serviceCIDRs = []netip.Prefix{ServiceCIDR, ServiceCIDR6}
	}
	// v6 is a host's IPv6 address in a dual-stack lab, else the zero Addr.
	v6 := func(a netip.Addr) netip.Addr {
		if cfg.DualStack {
			return a
		}
		return netip.Addr{}
	}

	say("building herald and hack/lab into %s", cfg.RunDir)
	if s.Herald, err = nl.Build(ctx, "herald.dev/herald/cmd/herald"); err != nil {
		return l, err
	}
	if s.LabBin, err = nl.Build(ctx, "./hack/lab"); err != nil {
		return l, err
	}
	s.SpeakerArgs = cfg.SpeakerArgs

	say("control plane: etcd, kube-apiserver, kube-controller-manager in %s%s at %s", cfg.Prefix, CPHost, cpAddr)
	cpHost, err := l.addHost(HostInfo{Name: CPHost, Role: RoleControlPlane, Addr: cpAddr, Addr6: v6(cpAddr6)})
	if err != nil {
		return l, err
	}
	if l.CP, err = netlab.StartControlPlane(ctx, cpHost, assets, serviceCIDRs...); err != nil {
		return l, err
	}
	s.Kubeconfig = l.CP.Kubeconfig
	l.record(l.CP.Process.Proc)
	if l.Kube, err = kubernetes.NewForConfig(l.CP.Config); err != nil {
		return l, fmt.Errorf("lab: client: %w", err)
	}
	say("herald's CRDs, namespace, ServiceAccounts and RBAC from %s; kubeconfigs of its ServiceAccounts", Manifest)
	if err := l.installHerald(ctx, root); err != nil {
		return l, err
	}

	var workers []HostInfo
	for i := range cfg.Workers {
		w := HostInfo{Name: WorkerName(i), Role: RoleWorker, Addr: workerAddr(i), PodCIDR: podCIDR(i), Addr6: v6(workerAddr6(i))}
		if cfg.DualStack {
			w.PodCIDR6 = podCIDR6(i)
		}
		if _, err := l.addHost(w); err != nil {
			return l, err
		}
		workers = append(workers, s.Hosts[len(s.Hosts)-1])
	}
	for _, w := range workers {
		if err := routeWorker(ctx, w, workers); err != nil {
			return l, err
		}
	}
	if _, err := l.addHost(HostInfo{Name: ClientHost, Role: RoleClient, Addr: clientAddr, Addr6: v6(clientAddr6)}); err != nil {
		return l, err
	}

	say("agents (kubelet stand-ins) registering %d Nodes", len(workers))
	for _, w := range workers {
		wrapper, cmd := agentCmd(s, w)
		np, err := nl.Host(w.Name).StartWrapped("agent", wrapper, cmd...)
		if err != nil {
			return l, err
		}
		l.record(np.Proc)
	}
	if err := l.waitNodesReady(ctx, workers); err != nil {
		return l, err
	}

	if cfg.WithoutHerald {
		say("herald's controller and speakers not started (StartHerald starts them)")
	} else {
		say("herald controller in %s%s, speakers with the proxier (%v) on the workers", cfg.Prefix, CPHost, proxierArgs(s))
		if err := s.StartHerald(ctx); err != nil {
			return l, err
		}
	}
	if err := s.Save(); err != nil {
		return l, err
	}
	say("up: state, logs and binaries in %s", cfg.RunDir)
	return l, nil
}

// addHost adds the host info describes (its name, role, addresses and pod CIDRs) to
// the lab and the state, which records its namespace and MAC too.
func (l *Lab) addHost(info HostInfo) (*netlab.Host, error) {
	h, err := l.Net.AddHost(info.Name, info.Addr)
	if err != nil {
		return nil, err
	}
	if info.Addr6.IsValid() {
		if err := h.AddAddr(info.Addr6); err != nil {
			return nil, fmt.Errorf("lab host %s: %w", info.Name, err)
		}
	}
	info.Namespace, info.MAC = h.Namespace(), h.MAC().String()
	l.State.Hosts = append(l.State.Hosts, info)
	return h, l.State.Save()
}

// record adds a process to the state, saved at once so that a failing Up leaves an
// accurate picture for status.
func (l *Lab) record(p netlab.Proc) {
	l.State.Procs[p.Key()] = p
	_ = l.State.Save() // Up's own errors matter more; the final Save reports
}

// installHerald applies herald's CRDs, namespace, ServiceAccounts and RBAC from the
// manifest (InstallManifest) and writes the kubeconfigs herald's components run with:
// tokens of the manifest's ServiceAccounts, so that they may do what the manifest's
// RBAC grants and nothing more.
func (l *Lab) installHerald(ctx context.Context, root string) error {
	c, err := client.New(l.CP.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("lab: client: %w", err)
	}
	if _, err := InstallManifest(ctx, c, root); err != nil {
		return err
	}
	s := l.State
	s.ControllerKubeconfig = filepath.Join(s.RunDir, "controller.kubeconfig")
	s.SpeakerKubeconfig = filepath.Join(s.RunDir, "speaker.kubeconfig")
	for sa, path := range map[types.NamespacedName]string{ControllerAccount: s.ControllerKubeconfig, SpeakerAccount: s.SpeakerKubeconfig} {
		if err := ServiceAccountKubeconfig(ctx, l.CP, sa, tokenTTL, path); err != nil {
			return err
		}
	}
	return s.Save()
}

// waitNodesReady waits until every worker's Node is Ready, which its agent reports.
func (l *Lab) waitNodesReady(ctx context.Context, workers []HostInfo) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for _, w := range workers {
		for {
			n, err := l.Kube.CoreV1().Nodes().Get(ctx, w.Name, metav1.GetOptions{})
			if err == nil && nodeReady(n) {
				break
			}
			p := l.State.Procs[w.Name+"-agent"]
			if !p.Alive() {
				return fmt.Errorf("lab: agent of %s exited; %s ends:\n%s", w.Name, p.Log, netlab.LogTail(p.Log, 15))
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("lab: Node %s not Ready: %w (last read: %v); %s ends:\n%s", w.Name, ctx.Err(), err, p.Log, netlab.LogTail(p.Log, 15))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
