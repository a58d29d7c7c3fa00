package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/netns"
)

// podNet is a running pod as the agent made it: a network namespace cabled to the node
// by a veth pair, and the whoami servers listening in it.
type podNet struct {
	rec     PodRecord
	servers []*http.Server
}

// podGateway6 is the IPv6 pods' gateway: a link-local address on the node's end of each
// pod's veth pair.
const podGateway6 = "fe80::1"

// setUpPod creates rec's namespace and veth pair and starts a whoami server on each of
// its ports. The agent runs in the node's namespace, so plain `ip` commands act on the
// node and `ip -n` on the pod. On error whatever was made is removed again.
//
// Addressing is that of point-to-point CNI plugins: the pod has its address as a /32 on
// eth0 and a default route through the node's gateway address (on the node's lo), which
// the node answers ARP for on every interface; the node reaches the pod by a /32 route
// through the veth. On a dual-stack node the pod also has its IPv6 address as a /128,
// routed alike, with podGateway6 as its gateway.
func setUpPod(ctx context.Context, rec PodRecord, gateway netip.Addr, hostname string) (*podNet, error) {
	if netns.Exists(rec.NetNS) {
		// Left by an agent that died between creating it and recording it.
		if err := deleteNetns(ctx, rec.NetNS); err != nil {
			return nil, err
		}
	}
	p := &podNet{rec: rec}
	if err := p.plumb(ctx, gateway); err != nil {
		return nil, errors.Join(err, deleteNetns(ctx, rec.NetNS))
	}
	if err := p.serve(hostname); err != nil {
		return nil, errors.Join(err, p.tearDown(ctx))
	}
	return p, nil
}

func (p *podNet) plumb(ctx context.Context, gateway netip.Addr) error {
	ns, veth, addr, gw := p.rec.NetNS, p.rec.Veth, p.rec.IP.String(), gateway.String()
	if _, err := ip(ctx, "netns", "add", ns); err != nil {
		return fmt.Errorf("pod %s/%s network: %w", p.rec.Namespace, p.rec.Name, err)
	}
	if p.rec.IP6.IsValid() {
		// eth0 inherits it when it arrives, so its link-local address, which neighbour
		// discovery with the node needs, works at once instead of after ~1 s of DAD.
		if err := netns.Do(ns, func() error {
			return os.WriteFile("/proc/sys/net/ipv6/conf/default/accept_dad", []byte("0"), 0)
		}); err != nil {
			return fmt.Errorf("pod %s/%s network: no DAD: %w", p.rec.Namespace, p.rec.Name, err)
		}
	}
	steps := [][]string{
		{"-n", ns, "link", "set", "lo", "up"},
		// Made in the node's namespace with the pod's end sent straight into the pod's.
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", ns, "addr", "add", addr + "/32", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "route", "add", gw, "dev", "eth0", "scope", "link"},
		{"-n", ns, "route", "add", "default", "via", gw, "dev", "eth0"},
		{"link", "set", veth, "up"},
		{"route", "replace", addr + "/32", "dev", veth},
	}
	if p.rec.IP6.IsValid() {
		// IPv6 the way Calico does it: Linux answers neighbour solicitations only for
		// addresses of the interface asked on, so the pods' gateway is a link-local
		// address on each node-side veth rather than one on lo.
		addr6 := p.rec.IP6.String()
		steps = append(steps,
			[]string{"-n", ns, "addr", "add", addr6 + "/128", "dev", "eth0", "nodad"},
			[]string{"addr", "add", podGateway6 + "/64", "dev", veth, "nodad"},
			[]string{"-n", ns, "-6", "route", "add", "default", "via", podGateway6, "dev", "eth0"},
			[]string{"-6", "route", "replace", addr6 + "/128", "dev", veth},
		)
	}
	for _, args := range steps {
		if _, err := ip(ctx, args...); err != nil {
			return fmt.Errorf("pod %s/%s network: %w", p.rec.Namespace, p.rec.Name, err)
		}
	}
	return nil
}

// serve starts a whoami server on each port, listening inside the pod's namespace; the
// servers run in the agent, so a pod needs no process of its own.
func (p *podNet) serve(hostname string) error {
	var ips []string
	err := netns.Do(p.rec.NetNS, func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		// Interface by interface (lo, then eth0), as whoami lists them.
		for _, ifi := range ifs {
			addrs, err := ifi.Addrs()
			if err != nil {
				return err
			}
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					ips = append(ips, ipn.IP.String())
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pod %s/%s addresses: %w", p.rec.Namespace, p.rec.Name, err)
	}
	handler := whoami{hostname: hostname, ips: ips}
	for _, port := range p.rec.Ports {
		l, err := netns.Listen(p.rec.NetNS, "tcp", ":"+strconv.Itoa(int(port)))
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", p.rec.Namespace, p.rec.Name, err)
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		p.servers = append(p.servers, srv)
		go func() { _ = srv.Serve(l) }() // ends with ErrServerClosed on tearDown
	}
	return nil
}

// tearDown stops the servers, whose sockets would otherwise keep the namespace alive
// after its name is gone, and removes the pod's network (removePodNet).
func (p *podNet) tearDown(ctx context.Context) error {
	for _, s := range p.servers {
		_ = s.Close() // closes the listener and every connection
	}
	p.servers = nil
	return removePodNet(ctx, p.rec)
}

// removePodNet deletes the node-side end of the pod's veth pair, which takes the pair
// and the node's route to the pod with it at once, then the namespace. Deleting the
// namespace alone frees the pair only once the kernel destroys the namespace, which
// takes minutes when something still holds it (the sockets of a killed agent's
// servers): an agent that rebuilds the pod meanwhile could not create its veth again.
func removePodNet(ctx context.Context, rec PodRecord) error {
	if rec.Veth != "" {
		if _, err := ip(ctx, "link", "del", rec.Veth); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			return err
		}
	}
	return deleteNetns(ctx, rec.NetNS)
}

func deleteNetns(ctx context.Context, ns string) error {
	if !netns.Exists(ns) {
		return nil
	}
	if _, err := ip(ctx, "netns", "delete", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
		return err
	}
	return nil
}

// ip runs the ip command (netlab.Run).
func ip(ctx context.Context, args ...string) ([]byte, error) { return netlab.Run(ctx, "ip", args...) }
