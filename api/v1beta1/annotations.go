package v1beta1

import (
	"fmt"
	"strings"
)

// Service annotations herald reads and writes. The names follow MetalLB's with the
// herald.dev/ prefix, and MetalLB's own names are read too (see MetalLBAliases).
const (
	// AnnotationLoadBalancerIPs asks for specific IPs: one, or one per family ("a,b").
	AnnotationLoadBalancerIPs = "herald.dev/loadBalancerIPs"
	// AnnotationAddressPool asks for an IP from the named pool only.
	AnnotationAddressPool = "herald.dev/address-pool"
	// AnnotationAllowSharedIP is the sharing key: Services with the same non-empty key,
	// the same traffic policy and disjoint ports may share one IP.
	AnnotationAllowSharedIP = "herald.dev/allow-shared-ip"
	// AnnotationAllocatedFromPool is written by the controller for users to read: the
	// pool the Service's IPs came from. herald never reads it back (the Service's owner
	// may edit it); the pool of an IP follows from the IP.
	AnnotationAllocatedFromPool = "herald.dev/ip-allocated-from-pool"

	// AnnotationRebalance asks for the Service's IPs to move, once, to the node the hash
	// places them on: an IP stays with the node announcing it (no fail-back) only while
	// that node's claim carries the annotation's current value. `herald rebalance` sets
	// it to the current time. MetalLB has no such annotation, so it has no alias.
	AnnotationRebalance = "herald.dev/rebalance"

	// PoolFinalizer keeps a pool whose addresses are held by Services until the last
	// one is released.
	PoolFinalizer = "herald.dev/pool-in-use"

	// ConditionReady is the pool condition that says whether it gives out addresses.
	ConditionReady = "Ready"
	// ConditionReservedAddresses is the pool condition, present when some of its
	// addresses are never given out because the cluster or the network uses them
	// (node addresses, pod and Service CIDRs, loopback, link-local, multicast,
	// unspecified and broadcast addresses); its message names them.
	ConditionReservedAddresses = "ReservedAddresses"
)

// MetalLB's prefixes of the same annotations: metallb.io/ since MetalLB 0.14.9, and
// metallb.universe.tf/ before (MetalLB still reads both).
const (
	MetalLBPrefix       = "metallb.io/"
	MetalLBLegacyPrefix = "metallb.universe.tf/"
)

// MetalLBAliases returns the names under which herald also reads one of its own
// annotations (name is one of the Annotation constants), in the order they are
// preferred: metallb.io/ before metallb.universe.tf/. Services that MetalLB served keep
// working unchanged.
func MetalLBAliases(name string) []string {
	suffix, ok := strings.CutPrefix(name, GroupVersion.Group+"/")
	if !ok {
		return nil
	}
	return []string{MetalLBPrefix + suffix, MetalLBLegacyPrefix + suffix}
}

// AnnotationValue is one of herald's Service annotations as read from a Service,
// under whichever of its names set it. It is no API object: no deepcopy.
//
// +kubebuilder:object:generate=false
type AnnotationValue struct {
	// Value is the value, without surrounding spaces; "" when no name sets it.
	Value string
	// From is the annotation Value came from: herald's name or a MetalLB alias.
	From string
	// Overridden lists the other names set to a different value, which lose to From,
	// as name="value".
	Overridden []string
}

// LookupAnnotation reads herald's annotation name (one of the Annotation constants)
// from a Service's annotations: herald's own name wins, then MetalLB's names in the
// order of MetalLBAliases. An empty value counts as not set.
func LookupAnnotation(annotations map[string]string, name string) AnnotationValue {
	var v AnnotationValue
	for _, n := range append([]string{name}, MetalLBAliases(name)...) {
		val := strings.TrimSpace(annotations[n])
		switch {
		case val == "":
		case v.From == "":
			v.Value, v.From = val, n
		case val != v.Value:
			v.Overridden = append(v.Overridden, fmt.Sprintf("%s=%q", n, val))
		}
	}
	return v
}

// Conflict says, for a Warning, which name is used and which are ignored when the
// annotation is set under several names to different values; "" when it is not.
func (v AnnotationValue) Conflict() string {
	if len(v.Overridden) == 0 {
		return ""
	}
	return fmt.Sprintf("annotation %s=%q is used; ignored: %s", v.From, v.Value, strings.Join(v.Overridden, ", "))
}
