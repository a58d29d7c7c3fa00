package election

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"
)

// ExcludeLabel on a Node keeps it from announcing, whatever the label's value.
const ExcludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// Node is a Kubernetes Node as the election sees it.
type Node struct {
	Name   string
	Labels map[string]string
	// NetworkUnavailable is true when the Node has condition NetworkUnavailable=True
	// (a node rebooting or whose CNI is not up yet must not take IPs; https://github.com/metallb/metallb/issues/1710).
	NetworkUnavailable bool
	// Leaving says why the node is being emptied for maintenance or removal ("" when it
	// is not): cordoned, tainted out-of-service or for deletion by the cluster
	// autoscaler, or shutting down (the kubelet's graceful node shutdown). A leaving node stays eligible but ranks after every node that is not
	// leaving, so its IPs move away and it takes none while another node can serve them.
	Leaving string
}

// Advertisement is an L2Advertisement with its pool references already resolved.
type Advertisement struct {
	Name string
	// AllPools is true when the L2Advertisement sets neither ipAddressPools nor
	// ipAddressPoolSelectors: it announces every pool.
	AllPools bool
	// Pools are the names from ipAddressPools plus the pools ipAddressPoolSelectors
	// select. Ignored when AllPools; empty otherwise means no pool.
	Pools []string
	// NodeSelectors: the nodes that may announce (any one matching). Empty: every node.
	NodeSelectors []labels.Selector
	// ServiceSelectors: the Services announced (any one matching). Empty: every Service.
	ServiceSelectors []labels.Selector
	// Interfaces to answer ARP/NDP on. Empty: every eligible interface.
	Interfaces []string
}

// Endpoint is one endpoint of one of the Service's EndpointSlices.
type Endpoint struct {
	// Node is endpoint.nodeName; "" when unset.
	Node string
	// Ready and Serving are endpoint.conditions.ready and .serving; nil when unset.
	Ready, Serving *bool
}

// Service is a LoadBalancer Service that holds IPs.
type Service struct {
	Key string // namespace/name
	// IPs from status.loadBalancer.ingress; their order does not matter.
	IPs []netip.Addr
	// Pool is the IPAddressPool the IPs belong to; "" when none does.
	Pool   string
	Labels map[string]string
	// Local is true for externalTrafficPolicy: Local.
	Local     bool
	Endpoints []Endpoint
}

// View is the cluster state one election runs on.
type View struct {
	// Members are the names of the live memberlist members (speakers).
	Members []string
	Nodes   []Node
	// Advertisements are all L2Advertisements; those not covering a Service are ignored.
	Advertisements []Advertisement
	// Incumbents are the nodes announcing IPs now, by IP: a group whose IPs name one
	// incumbent keeps it as owner, while it is among the best candidates, against the
	// nodes it stands in for (no fail-back). Nil or empty: placement by hash alone.
	Incumbents map[netip.Addr]Incumbent
	// IgnoreExcludeLabel lets nodes carrying ExcludeLabel announce anyway (single-node
	// and kind clusters, whose control-plane nodes carry it; https://github.com/metallb/metallb/issues/2274).
	IgnoreExcludeLabel bool
}

// Incumbent is the node announcing an IP, and the nodes it stands in for: those the
// hash ranked before it when it took the IP (a node that died, say). They do not take
// the IP back from it; any other node still ranks by hash (a node new to the cluster
// takes the IPs the hash gives it).
type Incumbent struct {
	Node string
	Over []string
}

// Decision is the outcome of the election for one IP.
type Decision struct {
	IP netip.Addr
	// Owner is the node that announces IP; "" when nobody does.
	Owner string
	// Key is the IP whose hashes ordered the candidates: the smallest IP of the group.
	Key netip.Addr
	// Interfaces the owner answers on: the union over the ads covering an active Service
	// and selecting the owner. Nil: every interface (one of those ads names none).
	Interfaces []string
	// Candidates are the first MaxCandidates of the eligible nodes that fit an active
	// Service, best first; Candidates[0] == Owner. The rest of the ranking is not kept:
	// O(nodes) per IP, and only the owner and the runner-up are read.
	Candidates []string
	// Services are the keys of the Services holding IP, sorted.
	Services []string
	// Unserved are the keys of active Services holding IP that the owner cannot serve
	// (no ad lets it announce them, or Local without an endpoint on it): possible only
	// when Services sharing the IP disagree on which nodes fit.
	Unserved []string
	// Reason and Message say why Owner is ""; both empty when there is an owner.
	Reason  Reason
	Message string
}
