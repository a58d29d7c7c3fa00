// Package agent is the lab's stand-in for the kubelet. One agent runs per lab node, in
// the node's network namespace: it registers the Node and keeps it Ready, and turns each
// Pod bound to the node (spec.nodeName) into a network namespace with a veth pair to the
// node, an address from the node's pod CIDR and a traefik/whoami-like HTTP server on the
// pod's container ports, then reports the Pod Running and Ready with its IP, so that the
// real EndpointSlice controller publishes it. A deleted Pod's namespace is removed and
// the Pod deleted for good, as a kubelet does once its containers are gone.
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
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Config is what an agent is told by the lab.
type Config struct {
	Node       string       // the Node's name
	NodeIP     netip.Addr   // its InternalIP, the node namespace's eth0 address
	PodCIDR    netip.Prefix // the node's pod addresses
	Kubeconfig string
	// NetnsPrefix starts the names of pod namespaces: the lab's prefix, so that tearing
	// down the lab removes them too.
	NetnsPrefix string
	// Dir keeps the agent's records of the pods it set up.
	Dir       string
	Heartbeat time.Duration
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

// Agent is one node's kubelet stand-in.
type Agent struct {
	cfg  Config
	cs   kubernetes.Interface
	log  *log.Logger
	ipam *ipam
	pods map[string]*podNet // by namespace/name; touched only by the sync worker
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
	if err := a.prepareNode(ctx); err != nil {
		return err
	}
	if err := a.forgetEarlierPods(ctx); err != nil {
		return err
	}
	if err := a.registerUntilDone(ctx); err != nil {
		return err
	}
	a.log.Printf("node %s registered (InternalIP %s, pod CIDR %s)", cfg.Node, cfg.NodeIP, cfg.PodCIDR)
	go a.heartbeat(ctx, cfg.Heartbeat)
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
		if err := deleteNetns(ctx, r.NetNS); err != nil {
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
