package speaker

import (
	"context"
	"net"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"herald.dev/herald/speaker/members"
)

// Speakers find each other through the Node objects: every speaker runs on its
// node's network (hostNetwork) and binds memberlist to the node's IP, so the
// InternalIP of every Node, at this speaker's memberlist port, is where a peer
// listens. That needs no more than the Nodes the election reads anyway (no Pod
// list, no extra RBAC); a Node without a speaker refuses the connection at once.

// join contacts the speakers of every Node (and the --ml-peers) that are not live
// members yet.
func (s *Speaker) join(ctx context.Context) {
	var nodes corev1.NodeList
	if err := s.cache.List(ctx, &nodes); err != nil {
		s.log.Error(err, "listing Nodes to find memberlist peers")
		return
	}
	peers := append(peerAddrs(nodes.Items, s.cfg.NodeName, s.cfg.Members.BindAddr, s.cfg.Members.BindPort), s.cfg.Peers...)
	n, err := s.members.Join(peers)
	if err != nil {
		// Expected for Nodes without a speaker; visible at -v 1.
		s.log.V(1).Info("some memberlist peers did not answer", "reached", n, "error", err.Error())
	} else if n > 0 {
		s.log.Info("joined memberlist peers", "reached", n)
	}
}

// peerAddrs returns "ip:port" of the InternalIP of each Node other than self, of the
// family of bindAddr.
func peerAddrs(nodes []corev1.Node, self, bindAddr string, port int) []string {
	bind, _ := netip.ParseAddr(bindAddr)
	if port == 0 {
		port = members.DefaultBindPort
	}
	var out []string
	for _, n := range nodes {
		if n.Name == self {
			continue
		}
		if ip, ok := internalIP(&n, bind.Is4()); ok {
			out = append(out, net.JoinHostPort(ip.String(), strconv.Itoa(port)))
		}
	}
	return out
}

// internalIP returns the first InternalIP of n of the family (IPv4 or not).
func internalIP(n *corev1.Node, v4 bool) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Unmap().Is4() == v4 {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
