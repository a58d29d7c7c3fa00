package v1beta1

// Reasons of the Events herald writes, for `kubectl get events --field-selector
// reason=...` and alerting on Events. Each says on which object it is written.
const (
	// On Services, by the controller.

	// ReasonIPAllocated (Normal): the Service got its IPs.
	ReasonIPAllocated = "IPAllocated"
	// ReasonAllocationFailed (Warning): the Service cannot get an IP; the note says why.
	ReasonAllocationFailed = "AllocationFailed"
	// ReasonIPReleased (Normal): the Service's IPs went back to their pool.
	ReasonIPReleased = "IPReleased"
	// ReasonAnnotationConflict (Warning): one of herald's annotations is set under
	// herald's name and MetalLB's (or under both of MetalLB's) to different values.
	ReasonAnnotationConflict = "AnnotationConflict"

	// On IPAddressPools, by the controller; the first three are also reasons of the
	// pool's Ready condition.

	// ReasonOverlap (Warning): the pool overlaps another enabled pool.
	ReasonOverlap = "Overlap"
	// ReasonInvalidAddresses (Warning): an entry of spec.addresses does not parse.
	ReasonInvalidAddresses = "InvalidAddresses"
	// ReasonDuplicateName (Warning): another pool has the same name.
	ReasonDuplicateName = "DuplicateName"
	// ReasonAddressesReserved (Warning): some of the pool's addresses are never given
	// out because the cluster or the network uses them.
	ReasonAddressesReserved = "AddressesReserved"

	// On Services, by the speaker that owns their IP.

	// ReasonAnnouncing (Normal): a node took the IP and answers for it.
	ReasonAnnouncing = "Announcing"
	// ReasonHandover (Normal): the node took the IP from a live node on purpose (cordon,
	// rebalance) and forwards the connections that node carries to it.
	ReasonHandover = "Handover"
	// ReasonHandoverEnded (Normal): the forwarding of a handover ended; the note says
	// why and how many flows it carried.
	ReasonHandoverEnded = "HandoverEnded"
	// ReasonInterfaceMissing (Warning): the owner has none of the interfaces the
	// L2Advertisement names.
	ReasonInterfaceMissing = "InterfaceMissing"
	// ReasonUnserved (Warning): no node may announce the IP; the note says why.
	ReasonUnserved = "Unserved"
	// ReasonIPConflict (Warning): another device on the network answers for the IP;
	// also the reason of the VIPStatus (VIPReasonIPConflict).
	ReasonIPConflict = VIPReasonIPConflict
	// ReasonIPConflictResolved (Normal): that device stopped answering.
	ReasonIPConflictResolved = VIPReasonIPConflict + "Resolved"

	// On Nodes, by the node's speaker or its peers.

	// ReasonSpeakerStalled (Warning): the node's speaker did not run for a while and
	// answered for no IP until it had heard its peers again.
	ReasonSpeakerStalled = "SpeakerStalled"
	// ReasonProxyFamilyMissing (Warning): the proxier cannot program an IP family here.
	ReasonProxyFamilyMissing = "ProxyFamilyMissing"
	// ReasonEndpointsWithheld (Warning): the node is known down; its endpoints get no
	// new connections from any node's proxier.
	ReasonEndpointsWithheld = "EndpointsWithheld"
	// ReasonEndpointsRestored (Normal): the node is back; its endpoints are used again.
	ReasonEndpointsRestored = "EndpointsRestored"
	// ReasonMemberlistPartitioned (Warning): the node's speaker does not hear some
	// speakers over memberlist; the note names them and what it does meanwhile.
	ReasonMemberlistPartitioned = "MemberlistPartitioned"
	// ReasonMemberlistHealed (Normal): it hears every speaker again.
	ReasonMemberlistHealed = "MemberlistHealed"
)
