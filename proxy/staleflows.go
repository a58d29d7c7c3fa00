package proxy

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"herald.dev/herald/proxy/model"
)

// staleFlows returns the `conntrack -D` filters that clear UDP flows a sync from prev
// to next left stuck. UDP has no connection to close: without this, a client that
// keeps sending from the same port keeps hitting a conntrack entry DNATed to a gone
// endpoint (or one that was rejected while there were no endpoints). As kube-proxy's
// conntrack cleanup (v1.28 CleanStaleEntries), for the services in changed:
//   - a UDP port that went away: every flow to its VIPs and NodePort;
//   - a UDP port that got endpoints after having none: the same (flows created while
//     it rejected traffic);
//   - an endpoint that was serving and no longer is (or is gone): the flows to the
//     port's VIPs and NodePort that were DNATed to it.
//
// VIPs are the ClusterIP, externalIPs and load balancer IPs of the family. TCP and SCTP
// flows end on their own, except those DNATed to an endpoint that became withheld
// (withheldFlows): its node is dead.
func staleFlows(family model.Family, prev, next []model.Service, changed model.ServiceSet) [][]string {
	before, after := byName(prev, changed), byName(next, changed)
	var out [][]string
	for name := range changed {
		old, cur := before[name], after[name]
		if old == nil {
			old = &model.Service{}
		}
		for _, op := range old.Ports {
			if op.Protocol != model.UDP {
				continue
			}
			var np *model.ServicePort
			if cur != nil {
				np = findPort(cur, op.Name)
			}
			if np == nil {
				out = append(out, clearAll(family, old, op)...)
				continue
			}
			was, is := udpEndpoints(family, old, op.Name), udpEndpoints(family, cur, op.Name)
			if len(was) == 0 && len(is) > 0 {
				out = append(out, clearAll(family, cur, *np)...)
				continue
			}
			for hostPort, serving := range was {
				if !serving || is[hostPort] {
					continue
				}
				ip := hostPort[:strings.LastIndexByte(hostPort, ':')]
				out = append(out, clearNAT(family, cur, *np, strings.Trim(ip, "[]"))...)
			}
		}
		if cur == nil {
			continue
		}
		out = append(out, withheldFlows(family, old, cur)...)
		for _, np := range cur.Ports {
			// A UDP port that is new is "newly active" as soon as it has endpoints.
			if np.Protocol == model.UDP && findPort(old, np.Name) == nil &&
				len(udpEndpoints(family, cur, np.Name)) > 0 {
				out = append(out, clearAll(family, cur, np)...)
			}
		}
	}
	slices.SortFunc(out, slices.Compare)
	return slices.CompactFunc(out, slices.Equal)
}

func byName(svcs []model.Service, only model.ServiceSet) map[model.ServiceName]*model.Service {
	m := make(map[model.ServiceName]*model.Service, len(only))
	for i := range svcs {
		if n := svcs[i].ServiceName(); only.Has(n) {
			m[n] = &svcs[i]
		}
	}
	return m
}

func findPort(svc *model.Service, name string) *model.ServicePort {
	for i := range svc.Ports {
		if p := &svc.Ports[i]; p.Name == name && p.Protocol == model.UDP {
			return p
		}
	}
	return nil
}

// udpEndpoints maps the "ip:port" endpoints of a UDP service port in the family to
// whether they are serving.
func udpEndpoints(family model.Family, svc *model.Service, port string) map[string]bool {
	eps := map[string]bool{}
	for _, slice := range svc.EndpointSlices {
		for _, p := range slice.Ports {
			if p.Name != port || p.Protocol != model.UDP {
				continue
			}
			for _, e := range slice.Endpoints {
				if ip := e.IP.Unmap(); inFamily(family, ip) {
					hp := netip.AddrPortFrom(ip, uint16(p.Port)).String()
					eps[hp] = eps[hp] || e.Serving
				}
			}
		}
	}
	return eps
}

// vips are the addresses the port's traffic arrives on in the family; none when the
// Service has no ClusterIP there (the generator gives it no rules).
func vips(family model.Family, svc *model.Service) []string {
	var out []string
	for _, a := range svc.ClusterIPs {
		if a = a.Unmap(); inFamily(family, a) {
			out = append(out, a.String())
			break
		}
	}
	if len(out) == 0 {
		return nil
	}
	for _, list := range [][]netip.Addr{svc.ExternalIPs, svc.LoadBalancerIPs} {
		for _, a := range list {
			if a = a.Unmap(); inFamily(family, a) {
				out = append(out, a.String())
			}
		}
	}
	return out
}

func clearAll(family model.Family, svc *model.Service, p model.ServicePort) [][]string {
	ips := vips(family, svc)
	var out [][]string
	for _, ip := range ips {
		out = append(out, filter(family, "--orig-dst", ip))
	}
	if p.NodePort != 0 && len(ips) > 0 {
		out = append(out, filter(family, "--dport", strconv.Itoa(p.NodePort)))
	}
	return out
}

func clearNAT(family model.Family, svc *model.Service, p model.ServicePort, endpoint string) [][]string {
	ips := vips(family, svc)
	var out [][]string
	for _, ip := range ips {
		out = append(out, filter(family, "--orig-dst", ip, "--dst-nat", endpoint))
	}
	if p.NodePort != 0 && len(ips) > 0 {
		out = append(out, filter(family, "--dport", strconv.Itoa(p.NodePort), "--dst-nat", endpoint))
	}
	return out
}

// filter is a conntrack filter for UDP flows of the family.
func filter(family model.Family, args ...string) []string {
	return protoFilter(family, model.UDP, args...)
}

// protoFilter is a conntrack filter for flows of the family and protocol.
func protoFilter(family model.Family, proto model.Protocol, args ...string) []string {
	f := []string{"-p", strings.ToLower(string(proto))}
	if family == model.IPv6 {
		f = append([]string{"-f", "ipv6"}, f...)
	}
	return append(f, args...)
}

// withheldFlows clears the TCP and SCTP flows of cur's ports that were DNATed to an
// endpoint unreachable now and not before: its node is dead (UDP flows go with those
// of every endpoint that stopped serving, which a withheld one does). Unlike flows to a pod that is merely going away,
// these have nobody left at the other end: cleared, the client's next packet is
// proxied again, to a live pod that answers with a reset (or rejected when none is
// left), instead of vanishing until the client gives up.
func withheldFlows(family model.Family, old, cur *model.Service) [][]string {
	var out [][]string
	addrs := vips(family, cur)
	if len(addrs) == 0 {
		return nil
	}
	for _, np := range cur.Ports {
		if np.Protocol != model.TCP && np.Protocol != model.SCTP {
			continue
		}
		was := unreachableEndpoints(family, old, np)
		for ip := range unreachableEndpoints(family, cur, np) {
			if was[ip] {
				continue
			}
			for _, vip := range addrs {
				out = append(out, protoFilter(family, np.Protocol, "--orig-dst", vip, "--dst-nat", ip))
			}
			if np.NodePort != 0 {
				out = append(out, protoFilter(family, np.Protocol, "--dport", strconv.Itoa(np.NodePort), "--dst-nat", ip))
			}
		}
	}
	return out
}

// unreachableEndpoints are the addresses of the family's endpoints of port p that are
// unreachable.
func unreachableEndpoints(family model.Family, svc *model.Service, p model.ServicePort) map[string]bool {
	out := map[string]bool{}
	for _, slice := range svc.EndpointSlices {
		for _, ep := range slice.Ports {
			if ep.Name != p.Name || ep.Protocol != p.Protocol {
				continue
			}
			for _, e := range slice.Endpoints {
				if ip := e.IP.Unmap(); e.Unreachable && inFamily(family, ip) {
					out[ip.String()] = true
				}
			}
		}
	}
	return out
}

func inFamily(f model.Family, a netip.Addr) bool {
	return (f == model.IPv4 && a.Is4()) || (f == model.IPv6 && a.Is6())
}
