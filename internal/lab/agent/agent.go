// Package agent is the lab's stand-in for the kubelet. One agent runs per lab node, in
// the node's network namespace: it registers the Node, renews its Lease in
// kube-node-lease and reports it Ready as a kubelet does, so that the node lifecycle
// controller marks it NotReady once the agent can no longer reach the API server (cable
// pulled, agent killed) and the agent marks it Ready again when it can. It turns each
// Pod bound to the node (spec.nodeName) into a network namespace with a veth pair to the
// node, an address from the node's pod CIDR and a traefik/whoami-like HTTP server on the
// pod's container ports, then reports the Pod Running and Ready with its IP, so that the
// real EndpointSlice controller publishes it, and reports it again when someone else
// (the node lifecycle controller, while the node was cut off) marked it not ready. A
// deleted Pod's namespace is removed and the Pod deleted for good, as a kubelet does
// once its containers are gone.
//
// The agent does not schedule: Pods must name their node, as the walkthrough's do. It
// runs no container image: whatever the image, the pod answers like whoami. Its HTTP
// servers run inside the agent (listeners made in the pod's namespace), so a pod costs
// no process; they stop when the agent does, and the next agent on the node rebuilds
// every pod from scratch.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Config is what an agent is told by the lab.
type Config struct {
	Node    string       // the Node's name
	NodeIP  netip.Addr   // its InternalIP, the node namespace's eth0 address
	PodCIDR netip.Prefix // the node's pod addresses
	// NodeIP6 and PodCIDR6 make a dual-stack node, as in kind's dual-stack clusters: its
	// IPv6 InternalIP (on eth0 too) and IPv6 pod CIDR; both zero for an IPv4-only node.
	NodeIP6    netip.Addr
	PodCIDR6   netip.Prefix
	Kubeconfig string
	// NetnsPrefix starts the names of pod namespaces: the lab's prefix, so that tearing
	// down the lab removes them too.
	NetnsPrefix string
	// Dir keeps the agent's records of the pods it set up.
	Dir       string
	Heartbeat time.Duration
	// Secrets are kept mounted as Secret volumes (secretvolume.go).
	Secrets []SecretVolume
}

func (c Config) validate() error {
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("no node name"))
	}
	if !c.NodeIP.IsValid() {
		errs = append(errs, errors.New("no node IP"))
	}
	if !c.PodCIDR.IsValid() {
		errs = append(errs, errors.New("no pod CIDR"))
	}
	if c.NodeIP.IsValid() && !c.NodeIP.Is4() || c.PodCIDR.IsValid() && !c.PodCIDR.Addr().Is4() {
		errs = append(errs, fmt.Errorf("node IP %s and pod CIDR %s: want IPv4 (IPv6 ones are NodeIP6 and PodCIDR6)", c.NodeIP, c.PodCIDR))
	}
	if c.NodeIP6.IsValid() != c.PodCIDR6.IsValid() {
		errs = append(errs, fmt.Errorf("IPv6 node IP %q and pod CIDR %q: want both or neither", c.NodeIP6, c.PodCIDR6))
	} else if c.NodeIP6.IsValid() && (!c.NodeIP6.Is6() || !c.PodCIDR6.Addr().Is6()) {
		errs = append(errs, fmt.Errorf("IPv6 node IP %s and pod CIDR %s: want IPv6", c.NodeIP6, c.PodCIDR6))
	}
	if c.Kubeconfig == "" {
		errs = append(errs, errors.New("no kubeconfig"))
	}
	if c.NetnsPrefix == "" || !strings.HasSuffix(c.NetnsPrefix, "-") {
		errs = append(errs, fmt.Errorf("namespace prefix %q: want the lab's, like \"hl-\"", c.NetnsPrefix))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("no state directory"))
	}
	if c.Heartbeat <= 0 {
		errs = append(errs, fmt.Errorf("heartbeat %v must be positive", c.Heartbeat))
	}
	return errors.Join(errs...)
}

// nodeIPs are the node's InternalIPs, IPv4 first.
func (c Config) nodeIPs() []string {
	ips := []string{c.NodeIP.String()}
	if c.NodeIP6.IsValid() {
		ips = append(ips, c.NodeIP6.String())
	}
	return ips
}

// podCIDRs are the node's pod CIDRs, IPv4 first, as spec.podCIDRs lists them.
func (c Config) podCIDRs() []string {
	cidrs := []string{c.PodCIDR.String()}
	if c.PodCIDR6.IsValid() {
		cidrs = append(cidrs, c.PodCIDR6.String())
	}
	return cidrs
}

// Agent is one node's kubelet stand-in.
type Agent struct {
	cfg  Config
	cs   kubernetes.Interface
	log  *log.Logger
	ipam *ipam
	// ipam6 hands out the pods' IPv6 addresses on a dual-stack node, else it is nil.
	ipam6 *ipam
	pods  map[string]*podNet // by namespace/name; touched only by the sync worker
	// shuttingDown: a graceful node shutdown began (SIGUSR1, as systemd's
	// PrepareForShutdown tells a kubelet; SIGUSR2 cancels it). The node reports
	// Ready=False "node is shutting down", as a kubelet does.
	shuttingDown atomic.Bool
	// statusPosted is when the node's status was last posted; touched by registration,
	// then only by the heartbeat.
	statusPosted time.Time
	// rechecking says the last recheck of the pods' statuses failed; touched only by the
	// sync worker.
	rechecking bool
}

// Run registers the node and serves its pods until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("lab agent: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("lab agent kubeconfig: %w", err)
	}
	rc.UserAgent = "herald-lab-agent/" + cfg.Node
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("lab agent client: %w", err)
	}
	pool, err := newIPAM(cfg.PodCIDR)
	if err != nil {
		return fmt.Errorf("lab agent: %w", err)
	}
	a := &Agent{cfg: cfg, cs: cs, ipam: pool, pods: map[string]*podNet{},
		log: log.New(os.Stderr, "agent "+cfg.Node+": ", log.LstdFlags|log.Lmicroseconds)}
	if cfg.PodCIDR6.IsValid() {
		if a.ipam6, err = newIPAM(cfg.PodCIDR6); err != nil {
			return fmt.Errorf("lab agent: %w", err)
		}
	}
	if err := a.prepareNode(ctx); err != nil {
		return err
	}
	if err := a.forgetEarlierPods(ctx); err != nil {
		return err
	}
	if err := a.registerUntilDone(ctx); err != nil {
		return err
	}
	a.log.Printf("node %s registered (InternalIPs %v, pod CIDRs %v)", cfg.Node, cfg.nodeIPs(), cfg.podCIDRs())
	go a.renewLeases(ctx)
	go a.heartbeat(ctx, cfg.Heartbeat)
	go a.followShutdown(ctx)
	for _, v := range cfg.Secrets {
		go a.mountSecret(ctx, v, time.Second)
	}
	return a.servePods(ctx)
}

// prepareNode puts the pods' gateway address on the node's lo, where the node answers
// ARP for it on every pod's veth.
func (a *Agent) prepareNode(ctx context.Context) error {
	if _, err := ip(ctx, "addr", "replace", a.ipam.gateway().String()+"/32", "dev", "lo"); err != nil {
		return fmt.Errorf("lab agent: pod gateway: %w", err)
	}
	return nil
}

// forgetEarlierPods removes the namespaces an earlier agent on this node left: their
// servers died with it, so they are rebuilt from the API rather than adopted.
func (a *Agent) forgetEarlierPods(ctx context.Context) error {
	recs, err := ReadRecords(a.cfg.Dir)
	if err != nil {
		return fmt.Errorf("lab agent: %w", err)
	}
	var errs []error
	for _, r := range recs {
		a.log.Printf("removing pod %s/%s left by an earlier agent (%s)", r.Namespace, r.Name, r.NetNS)
		if err := removePodNet(ctx, r); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, r.remove(a.cfg.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab agent: %w", err)
	}
	return nil
}

// registerUntilDone retries registration: the agent may start before the API server
// answers on the node's network, as a kubelet may.
func (a *Agent) registerUntilDone(ctx context.Context) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := a.register(rctx)
		cancel()
		if err == nil {
			return nil
		}
		a.log.Printf("%v; retrying", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("lab agent: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}
