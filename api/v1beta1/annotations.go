package v1beta1

// Service annotations herald reads and writes. The names follow MetalLB's with the
// herald.dev/ prefix.
const (
	// AnnotationLoadBalancerIPs asks for specific IPs: one, or one per family ("a,b").
	AnnotationLoadBalancerIPs = "herald.dev/loadBalancerIPs"
	// AnnotationAddressPool asks for an IP from the named pool only.
	AnnotationAddressPool = "herald.dev/address-pool"
	// AnnotationAllowSharedIP is the sharing key: Services with the same non-empty key,
	// the same traffic policy and disjoint ports may share one IP.
	AnnotationAllowSharedIP = "herald.dev/allow-shared-ip"
	// AnnotationAllocatedFromPool is written by the controller: the pool the Service's
	// IPs came from.
	AnnotationAllocatedFromPool = "herald.dev/ip-allocated-from-pool"

	// PoolFinalizer keeps a pool whose addresses are held by Services until the last
	// one is released.
	PoolFinalizer = "herald.dev/pool-in-use"

	// ConditionReady is the pool condition that says whether it gives out addresses.
	ConditionReady = "Ready"
)
