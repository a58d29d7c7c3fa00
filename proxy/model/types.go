package model

import (
	"net/netip"
)

// Family is the IP family rules are generated for: one iptables-restore (or one nftables
// table) per family, like kube-proxy's one proxier per family.
type Family int

const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	default:
		return "unknown family"
	}
}

// Contains reports whether addr belongs to the family. Callers unmap IPv4-mapped IPv6
// addresses first, as kube-proxy treats them as IPv4 (net.IP.To4).
func (f Family) Contains(addr netip.Addr) bool {
	return (f == IPv4 && addr.Is4()) || (f == IPv6 && addr.Is6())
}

// Protocol is a Service port protocol as spelled in the Kubernetes API.
type Protocol string

const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// ServiceType is spec.type. ExternalName Services are never proxied; a shell may pass
// them (they are skipped silently, like kube-proxy does) or leave them out.
type ServiceType string

const (
	ClusterIP    ServiceType = "ClusterIP"
	NodePort     ServiceType = "NodePort"
	LoadBalancer ServiceType = "LoadBalancer"
	ExternalName ServiceType = "ExternalName"
)

// TrafficPolicy is spec.externalTrafficPolicy or spec.internalTrafficPolicy.
// The empty value means Cluster, which is the API default for both.
type TrafficPolicy string

const (
	PolicyCluster TrafficPolicy = "Cluster"
	PolicyLocal   TrafficPolicy = "Local"
)

// DefaultAffinityTimeoutSeconds is the API default of
// spec.sessionAffinityConfig.clientIP.timeoutSeconds (3 hours).
const DefaultAffinityTimeoutSeconds = 10800

// ServiceName identifies a Service; partial syncs track changes per ServiceName, like
// kube-proxy's UpdatedServices sets.
type ServiceName struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (n ServiceName) String() string { return n.Namespace + "/" + n.Name }

// Service is one Kubernetes Service and its EndpointSlices, reduced to what the proxy
// rules depend on.
type Service struct {
	// Namespace and Name are metadata.namespace and metadata.name. They appear in
	// comments and chain-name hashes, so they must be valid Kubernetes names.
	Namespace string
	Name      string
	// Type is spec.type ("" is taken as ClusterIP, the API default). It decides, with
	// ExternalIPs, whether ExternalTrafficPolicy applies and whether HealthCheckNodePort
	// is used (LoadBalancer only). ExternalName services get no rules.
	Type ServiceType
	// ClusterIPs is spec.clusterIPs (or spec.clusterIP for old objects), both families.
	// A headless Service ("None") has none and gets no rules, as in kube-proxy.
	ClusterIPs []netip.Addr
	// ExternalIPs is spec.externalIPs, both families, already parsed.
	ExternalIPs []netip.Addr
	// LoadBalancerIPs is status.loadBalancer.ingress[].ip, both families. The shell must
	// leave out ingress entries with ipMode "Proxy" and entries with only a hostname:
	// kube-proxy ignores both (proxyutil.IsVIPMode).
	LoadBalancerIPs []netip.Addr
	// LoadBalancerSourceRanges is spec.loadBalancerSourceRanges after strings.TrimSpace
	// and parsing, both families. Host bits are allowed; rules print the masked
	// network. A zero-length prefix of the family means "allow all", as in kube-proxy.
	LoadBalancerSourceRanges []netip.Prefix
	// ExternalTrafficPolicy is spec.externalTrafficPolicy ("" means Cluster). Local only
	// takes effect for NodePort and LoadBalancer Services and ClusterIP Services with
	// externalIPs, like apiservice.ExternalPolicyLocal.
	ExternalTrafficPolicy TrafficPolicy
	// InternalTrafficPolicy is spec.internalTrafficPolicy ("" means Cluster).
	InternalTrafficPolicy TrafficPolicy
	// SessionAffinityClientIP is spec.sessionAffinity == ClientIP.
	SessionAffinityClientIP bool
	// AffinityTimeoutSeconds is spec.sessionAffinityConfig.clientIP.timeoutSeconds;
	// 0 means DefaultAffinityTimeoutSeconds. Ignored without SessionAffinityClientIP.
	AffinityTimeoutSeconds int
	// HealthCheckNodePort is spec.healthCheckNodePort. It is only used for LoadBalancer
	// Services with ExternalTrafficPolicy Local, like kube-proxy (apiservice.NeedsHealthCheck).
	HealthCheckNodePort int
	// Ports is spec.ports.
	Ports []ServicePort
	// EndpointSlices are the Service's EndpointSlices (label kubernetes.io/service-name),
	// of either address type; FQDN slices must be left out.
	EndpointSlices []EndpointSlice
}

// ServiceName returns the Service's namespace and name.
func (s *Service) ServiceName() ServiceName {
	return ServiceName{Namespace: s.Namespace, Name: s.Name}
}

// ServicePort is one entry of spec.ports.
type ServicePort struct {
	// Name is ports[].name; "" for the single unnamed port.
	Name string
	// Protocol is ports[].protocol; "" is not defaulted (the API server defaults it).
	Protocol Protocol
	// Port is ports[].port, 1-65535.
	Port int
	// NodePort is ports[].nodePort, 0 when none is allocated.
	NodePort int
}

// EndpointSlice is one discovery.k8s.io/v1 EndpointSlice of a Service. Endpoints are
// matched to service ports by port name and protocol, like kube-proxy's
// EndpointSliceCache.
type EndpointSlice struct {
	// Ports is the slice's ports[]; entries with a nil name or nil/zero port must be
	// left out (kube-proxy ignores them).
	Ports []EndpointPort
	// Endpoints is the slice's endpoints[]; entries without addresses must be left out.
	Endpoints []Endpoint
}

// EndpointPort is one entry of an EndpointSlice's ports[].
type EndpointPort struct {
	Name     string
	Protocol Protocol
	// Port is the target port the traffic is DNATed to.
	Port int
}

// Endpoint is one entry of an EndpointSlice's endpoints[].
type Endpoint struct {
	// IP is addresses[0] (kube-proxy uses only the first address).
	IP netip.Addr
	// NodeName is nodeName; the endpoint is local when it equals Node.Name.
	NodeName string
	// Ready, Serving and Terminating are the endpoint conditions with the API's nil
	// semantics already applied: Ready = ready==nil || *ready, Serving = serving==nil ||
	// *serving, Terminating = terminating!=nil && *terminating.
	Ready       bool
	Serving     bool
	Terminating bool
	// Withheld: the endpoint's node is known dead (its speaker vanished from memberlist
	// without a goodbye and nothing proves it alive, or said goodbye and its host then
	// stopped answering), so it gets no new connections and
	// its open flows are cleared, long before the API server marks it not ready. The
	// tracker sets it together with Ready and Serving false; the API never does.
	Withheld bool
	// Unreachable: withheld, and its node answers nothing on the network any more, so
	// the flows DNATed to it are cleared too.
	Unreachable bool
	// ZoneHints and NodeHints are hints.forZones[].name and hints.forNodes[].name
	// (topology-aware routing / trafficDistribution).
	ZoneHints []string
	NodeHints []string
}

// LocalDetector selects kube-proxy's --detect-local-mode. At most one field may be set;
// none set is the no-op detector, which drops the rules that need it.
type LocalDetector struct {
	// PodCIDRs (modes ClusterCIDR and NodeCIDR): pods are those with a source address
	// in the first CIDR of the family, like kube-proxy.
	PodCIDRs []netip.Prefix
	// BridgeInterface (mode BridgeInterface): pods come in on this interface.
	BridgeInterface string
	// InterfaceNamePrefix (mode InterfaceNamePrefix): pods come in on interfaces with
	// this name prefix.
	InterfaceNamePrefix string
}
