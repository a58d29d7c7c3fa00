package model

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// PortInfo is one service port as the proxier of one family sees it: kube-proxy's
// servicePortInfo plus the port's endpoints from its EndpointSlices. Addresses are
// already filtered to the family and written as rule text.
type PortInfo struct {
	Service  ServiceName
	Name     string // kube-proxy's ServicePortName.String(): "ns/name:port" or "ns/name"
	PortName string // spec.ports[].name, "" for the single unnamed port
	Protocol string // "tcp", "udp" or "sctp"

	ClusterIP string
	Port      string // spec.ports[].port
	NodePort  int    // 0 when none

	ExternalIPs     []string
	LoadBalancerIPs []string
	SourceRanges    []netip.Prefix // loadBalancerSourceRanges of the family, masked; nil allows all

	ExternalLocal bool // externalTrafficPolicy Local, where it applies
	InternalLocal bool // internalTrafficPolicy Local
	Affinity      bool // sessionAffinity ClientIP
	// AffinitySeconds is the ClientIP affinity timeout, defaulted; 0 without Affinity.
	AffinitySeconds int
	// HealthCheckNodePort is spec.healthCheckNodePort where kube-proxy serves it
	// (LoadBalancer with externalTrafficPolicy Local), else 0.
	HealthCheckNodePort int

	// Endpoints are deduplicated and sorted by "ip:port"; Endpoints[i].Index == i.
	Endpoints []*EndpointInfo
}

// ExternallyAccessible reports whether the port has any external destination.
func (p *PortInfo) ExternallyAccessible() bool {
	return p.NodePort != 0 || len(p.LoadBalancerIPs) > 0 || len(p.ExternalIPs) > 0
}

// UsesClusterEndpoints: the Cluster endpoint set is needed for ClusterIP traffic with
// internalTrafficPolicy Cluster, and for any external traffic (even with Local policy,
// pods and the node itself are short-circuited to all endpoints).
func (p *PortInfo) UsesClusterEndpoints() bool {
	return !p.InternalLocal || p.ExternallyAccessible()
}

// UsesLocalEndpoints: the Local set is needed for either traffic policy set to Local.
func (p *PortInfo) UsesLocalEndpoints() bool {
	return p.InternalLocal || (p.ExternalLocal && p.ExternallyAccessible())
}

// Resolve turns services into the port list of one family, sorted by service port name
// and protocol, skipping (and reporting) what cannot be expressed. nodeName decides
// which endpoints are local. It is kube-proxy's ServiceChangeTracker and
// EndpointsChangeTracker for one family, as a pure function.
func Resolve(services []Service, family Family, nodeName string) ([]*PortInfo, []Problem) {
	var probs problems
	var ports []*PortInfo
	seen := make(map[ServiceName]bool, len(services))
	for i := range services {
		svc := &services[i]
		name := svc.ServiceName()
		if seen[name] {
			probs.add(name, "", fmt.Errorf("%w service", ErrDuplicate))
			continue
		}
		seen[name] = true
		ports = append(ports, resolveService(svc, family, nodeName, &probs)...)
	}
	slices.SortFunc(ports, func(a, b *PortInfo) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Protocol, b.Protocol))
	})
	return ports, probs
}

// resolveService returns the ports of svc proxied in family; none when the service is
// skipped (headless, ExternalName, no ClusterIP of the family, or invalid).
func resolveService(svc *Service, family Family, nodeName string, probs *problems) []*PortInfo {
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
	clusterIP, ok := clusterIPOf(svc, family, probs)
	if !ok {
		return nil
	}

	shared := PortInfo{
		Service:         name,
		ClusterIP:       clusterIP.String(),
		ExternalIPs:     addrsOf(svc, "external IP", svc.ExternalIPs, family, probs),
		LoadBalancerIPs: addrsOf(svc, "load balancer IP", svc.LoadBalancerIPs, family, probs),
		SourceRanges:    sourceRangesOf(svc, family, probs),
		ExternalLocal:   svc.ExternalTrafficPolicy == PolicyLocal && externallyAccessibleType(svc),
		InternalLocal:   svc.InternalTrafficPolicy == PolicyLocal,
		Affinity:        svc.SessionAffinityClientIP,
	}
	if shared.Affinity {
		shared.AffinitySeconds = svc.AffinityTimeoutSeconds
		if shared.AffinitySeconds == 0 {
			shared.AffinitySeconds = DefaultAffinityTimeoutSeconds
		}
	}
	if svc.Type == LoadBalancer && shared.ExternalLocal {
		shared.HealthCheckNodePort = svc.HealthCheckNodePort
	}

	var ports []*PortInfo
	for i := range svc.Ports {
		sp := &svc.Ports[i]
		protocol, err := checkPort(svc.Ports[:i], sp)
		if err != nil {
			probs.add(name, fmt.Sprintf("port %q/%s", sp.Name, sp.Protocol), err)
			continue
		}
		p := shared // copy; the slices are shared read-only between ports
		p.Name = servicePortName(name, sp.Name)
		p.PortName = sp.Name
		p.Protocol = protocol
		p.Port = strconv.Itoa(sp.Port)
		p.NodePort = sp.NodePort
		p.Endpoints = collectEndpoints(svc, sp, &p, family, nodeName, probs)
		ports = append(ports, &p)
	}
	return ports
}

// servicePortName is kube-proxy's ServicePortName.String(): "ns/name:port", or
// "ns/name" for an unnamed port. It is the text of comments and the input of hashes.
func servicePortName(svc ServiceName, port string) string {
	if port == "" {
		return svc.String()
	}
	return svc.String() + ":" + port
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
		if a = a.Unmap(); family.Contains(a) {
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
		if a = a.Unmap(); family.Contains(a) {
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
		if p = UnmapPrefix(p); family.Contains(p.Addr()) {
			if p.Bits() == 0 {
				return nil
			}
			out = append(out, p)
		}
	}
	return out
}

// validAddr rejects the zero Addr and scoped IPv6 addresses, which have no rule text.
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

// UnmapPrefix turns an IPv4-mapped IPv6 prefix into its IPv4 form, as net.ParseCIDR
// does, and clears host bits, as net.IPNet.String shows the network address.
func UnmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() {
		bits := p.Bits() - 96
		if bits < 0 {
			bits = 0
		}
		p = netip.PrefixFrom(a.Unmap(), bits)
	}
	return p.Masked()
}
