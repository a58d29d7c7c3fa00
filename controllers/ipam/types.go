package ipam

import (
	"net/netip"
	"time"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/labels"
)

// Family is an IP address family.
type Family int

const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// FamilyOf returns the family of a.
func FamilyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// Pool is an IPAddressPool as the allocator sees it.
type Pool struct {
	Name string
	// Ranges are the parsed spec.addresses (ParseAddresses), in declaration order.
	Ranges        []netipx.IPRange
	AutoAssign    bool
	AvoidBuggyIPs bool
	// CrossNamespaceSharing lets Services of different namespaces share an address
	// of the pool (spec.allowCrossNamespaceSharing); see mayShareAcross.
	CrossNamespaceSharing bool
	// Created orders pools when they overlap: the older pool keeps the addresses.
	Created time.Time
	// Terminating pools (deletionTimestamp set) give out no new addresses; the IPs they
	// already gave stay with their Services.
	Terminating bool
	// Allocation is nil when spec.serviceAllocation is absent.
	Allocation *Allocation
}

// Allocation mirrors spec.serviceAllocation with its selectors already parsed.
type Allocation struct {
	// Priority: lower is preferred; 0 means "no priority" and sorts after every positive one.
	Priority           int
	Namespaces         []string
	NamespaceSelectors []labels.Selector
	ServiceSelectors   []labels.Selector
}

// Port is one (protocol, port) pair of a Service; sharing an IP needs disjoint pairs.
type Port struct {
	Protocol string
	Port     int32
}

// DualStackPolicy mirrors spec.ipFamilyPolicy.
type DualStackPolicy int

const (
	SingleStack DualStackPolicy = iota
	PreferDualStack
	RequireDualStack
)

// Service is a LoadBalancer Service as the allocator sees it.
type Service struct {
	Key             string // namespace/name
	Namespace       string
	Labels          map[string]string
	NamespaceLabels map[string]string
	// Families from spec.ipFamilies, primary first (1 or 2 entries).
	Families []Family
	Policy   DualStackPolicy
	// RequestedIPs from herald.dev/loadBalancerIPs or spec.loadBalancerIP (at most one per family).
	RequestedIPs []netip.Addr
	// Pool from the herald.dev/address-pool annotation ("" = any pool).
	Pool string
	// SharingKey from herald.dev/allow-shared-ip ("" = no sharing).
	SharingKey string
	// SharingKeyFrom is the annotation SharingKey was read from (herald's or a MetalLB
	// alias), named in errors; "" means herald.dev/allow-shared-ip.
	SharingKeyFrom string
	// BackendKey is "" for externalTrafficPolicy Cluster and the selector string for Local:
	// Services sharing an IP must have the same one.
	BackendKey string
	Ports      []Port
	Created    time.Time
}

// Result is what the allocator decided for one Service.
type Result struct {
	IPs  []netip.Addr // primary family first; empty on failure
	Pool string       // the pool the IPs came from ("" if no current pool contains them)
	// Changed is true when IPs differ from what the Service held before the call.
	Changed bool
}

// PoolStats are the counts written to IPAddressPool.status and the metrics.
// Counts saturate at math.MaxInt64 for huge IPv6 pools.
type PoolStats struct {
	AssignedIPv4, AssignedIPv6   int64
	AvailableIPv4, AvailableIPv6 int64
	// Conflict are free addresses a device on the network claims: not available.
	ConflictIPv4, ConflictIPv6 int64
}

// PoolProblem explains why a pool gives out no addresses (e.g. it overlaps an older pool).
type PoolProblem struct {
	Pool   string
	Reason string // "Overlap"
	// Message names the other pool and the overlapping addresses.
	Message string
}
