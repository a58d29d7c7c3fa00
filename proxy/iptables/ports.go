package iptables

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// portInfo is one service port as seen by the proxier of one family: kube-proxy's
// servicePortInfo plus the port's endpoints from its EndpointSlices.
type portInfo struct {
	svc       ServiceName
	name      string // servicePortName: "ns/name:port"
	protocol  string // "tcp", "udp" or "sctp"
	chains    portChains
	clusterIP string
	port      string
	nodePort  int

	externalIPs  []string
	lbIPs        []string
	sourceRanges []netip.Prefix

	externalLocal   bool // externalTrafficPolicy Local, where it applies
	internalLocal   bool // internalTrafficPolicy Local
	affinity        bool // sessionAffinity ClientIP
	affinityTimeout string
	healthCheckPort int

	endpoints []*endpointInfo // deduplicated, sorted by "ip:port"
}

func (p *portInfo) externallyAccessible() bool {
	return p.nodePort != 0 || len(p.lbIPs) > 0 || len(p.externalIPs) > 0
}

// usesClusterEndpoints: the Cluster endpoint set is needed for ClusterIP traffic with
// internalTrafficPolicy Cluster, and for any external traffic (even with Local policy,
// pods and the node itself are short-circuited to all endpoints).
func (p *portInfo) usesClusterEndpoints() bool {
	return !p.internalLocal || p.externallyAccessible()
}

func (p *portInfo) usesLocalEndpoints() bool {
	return p.internalLocal || (p.externalLocal && p.externallyAccessible())
}

// resolveServices turns the snapshot's services into the port list of one family, sorted
// by service port name and protocol, reporting and skipping what cannot be expressed.
func resolveServices(snap *Snapshot, node *nodeRules, probs *problems) []*portInfo {
	var ports []*portInfo
	seen := make(map[ServiceName]bool, len(snap.Services))
	for i := range snap.Services {
		svc := &snap.Services[i]
		name := svc.ServiceName()
		if seen[name] {
			probs.add(name, "", fmt.Errorf("%w service", ErrDuplicate))
			continue
		}
		seen[name] = true
		ports = append(ports, resolveService(svc, node, probs)...)
	}
	slices.SortFunc(ports, func(a, b *portInfo) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.protocol, b.protocol))
	})
	return ports
}

// resolveService returns the ports of svc proxied in node.family; none when the service
// is skipped (headless, ExternalName, no ClusterIP of the family, or invalid).
func resolveService(svc *Service, node *nodeRules, probs *problems) []*portInfo {
	name := svc.ServiceName()
	if !validLabel(svc.Namespace, 63) || !validLabel(svc.Name, 63) {
		probs.add(name, "", fmt.Errorf("%w: namespace and name must be DNS labels", ErrInvalidName))
		return nil
	}
	switch svc.Type {
	case "", ClusterIP, NodePort, LoadBalancer:
	case ExternalName:
		return nil
	default:
		probs.add(name, "", fmt.Errorf("%w %q", ErrInvalidType, svc.Type))
		return nil
	}
	if svc.SessionAffinityClientIP && (svc.AffinityTimeoutSeconds < 0 || svc.AffinityTimeoutSeconds > 86400) {
		probs.add(name, "", fmt.Errorf("%w: %d seconds", ErrInvalidTimeout, svc.AffinityTimeoutSeconds))
		return nil
	}
	if svc.HealthCheckNodePort < 0 || svc.HealthCheckNodePort > 65535 {
		probs.add(name, "", fmt.Errorf("%w: health check node port %d", ErrInvalidPort, svc.HealthCheckNodePort))
		return nil
	}
	clusterIP, ok := clusterIPOf(svc, node.family, probs)
	if !ok {
		return nil
	}

	shared := portInfo{
		svc:           name,
		clusterIP:     clusterIP.String(),
		externalIPs:   addrsOf(svc, "external IP", svc.ExternalIPs, node.family, probs),
		lbIPs:         addrsOf(svc, "load balancer IP", svc.LoadBalancerIPs, node.family, probs),
		sourceRanges:  sourceRangesOf(svc, node.family, probs),
		externalLocal: svc.ExternalTrafficPolicy == PolicyLocal && externallyAccessibleType(svc),
		internalLocal: svc.InternalTrafficPolicy == PolicyLocal,
		affinity:      svc.SessionAffinityClientIP,
	}
	if shared.affinity {
		timeout := svc.AffinityTimeoutSeconds
		if timeout == 0 {
			timeout = DefaultAffinityTimeoutSeconds
		}
		shared.affinityTimeout = strconv.Itoa(timeout)
	}
	if svc.Type == LoadBalancer && shared.externalLocal {
		shared.healthCheckPort = svc.HealthCheckNodePort
	}

	var ports []*portInfo
	for i := range svc.Ports {
		sp := &svc.Ports[i]
		protocol, err := checkPort(svc.Ports[:i], sp)
		if err != nil {
			probs.add(name, fmt.Sprintf("port %q/%s", sp.Name, sp.Protocol), err)
			continue
		}
		p := shared // copy; the slices are shared read-only between ports
		p.name = servicePortName(name, sp.Name)
		p.protocol = protocol
		p.chains = newPortChains(p.name, protocol)
		p.port = strconv.Itoa(sp.Port)
		p.nodePort = sp.NodePort
		p.endpoints = collectEndpoints(svc, sp, &p, node, probs)
		ports = append(ports, &p)
	}
	return ports
}

// checkPort validates a service port against itself and the ports before it, and returns
// its protocol in lowercase.
func checkPort(before []ServicePort, sp *ServicePort) (string, error) {
	protocol, err := lowerProtocol(sp.Protocol)
	switch {
	case err != nil:
		return "", err
	case sp.Name != "" && !validLabel(sp.Name, 63):
		// A DNS label, as the API server validates Service port names (the 15-character
		// IANA limit is for container ports).
		return "", fmt.Errorf("%w: port names are at most 63 of a-z, 0-9 and -", ErrInvalidName)
	case sp.Port < 1 || sp.Port > 65535:
		return "", fmt.Errorf("%w: port %d", ErrInvalidPort, sp.Port)
	case sp.NodePort < 0 || sp.NodePort > 65535:
		return "", fmt.Errorf("%w: node port %d", ErrInvalidPort, sp.NodePort)
	}
	for _, b := range before {
		// An earlier invalid port with the same name and protocol was skipped, so this
		// one is still a duplicate: the input is ambiguous either way.
		if b.Name == sp.Name && b.Protocol == sp.Protocol {
			return "", fmt.Errorf("%w port name and protocol", ErrDuplicate)
		}
	}
	return protocol, nil
}

// externallyAccessibleType is apiservice.ExternallyAccessible: whether
// externalTrafficPolicy means anything for this service at all.
func externallyAccessibleType(svc *Service) bool {
	return svc.Type == LoadBalancer || svc.Type == NodePort ||
		((svc.Type == ClusterIP || svc.Type == "") && len(svc.ExternalIPs) > 0)
}

// clusterIPOf picks the service's ClusterIP of the family. ok is false when the service
// is not proxied in this family, or is skipped for an invalid address.
func clusterIPOf(svc *Service, family Family, probs *problems) (ip netip.Addr, ok bool) {
	for _, a := range svc.ClusterIPs {
		if !validAddr(a) {
			probs.add(svc.ServiceName(), "", fmt.Errorf("%w: cluster IP %q", ErrInvalidAddress, a))
			return netip.Addr{}, false
		}
	}
	for _, a := range svc.ClusterIPs {
		if a = a.Unmap(); family.contains(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// addrsOf returns the addresses of the family as rule text, skipping invalid ones.
func addrsOf(svc *Service, what string, addrs []netip.Addr, family Family, probs *problems) []string {
	var out []string
	for _, a := range addrs {
		if !validAddr(a) {
			probs.add(svc.ServiceName(), fmt.Sprintf("%s %q", what, a), ErrInvalidAddress)
			continue
		}
		if a = a.Unmap(); family.contains(a) {
			out = append(out, a.String())
		}
	}
	return out
}

// sourceRangesOf filters loadBalancerSourceRanges to the family. As in kube-proxy, a
// zero-length range means "allow all" and is the same as no ranges.
func sourceRangesOf(svc *Service, family Family, probs *problems) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range svc.LoadBalancerSourceRanges {
		if !p.IsValid() || p.Addr().Zone() != "" {
			probs.add(svc.ServiceName(), fmt.Sprintf("source range %q", p), ErrInvalidPrefix)
			continue
		}
		if p = unmapPrefix(p); family.contains(p.Addr()) {
			if p.Bits() == 0 {
				return nil
			}
			out = append(out, p)
		}
	}
	return out
}

// validAddr rejects the zero Addr and scoped IPv6 addresses, which have no iptables text.
func validAddr(a netip.Addr) bool {
	return a.IsValid() && a.Zone() == ""
}

func lowerProtocol(p Protocol) (string, error) {
	switch p {
	case TCP:
		return "tcp", nil
	case UDP:
		return "udp", nil
	case SCTP:
		return "sctp", nil
	}
	return "", fmt.Errorf("%w %q", ErrInvalidProtocol, p)
}

// validLabel accepts 1..max characters of a-z, 0-9 and "-": the alphabet of namespace,
// service and port names. It keeps comments and hashes free of quotes and spaces.
func validLabel(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
