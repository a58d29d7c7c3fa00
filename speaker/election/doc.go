// Package election decides which node announces each LoadBalancer IP at layer 2. It is
// pure: plain values in (View, []Service), plain values out ([]Decision); no client, no
// I/O, no clock, no globals. Every speaker runs it on its own copy of the cluster state;
// speakers that see the same inputs elect the same owner, with no messages exchanged.
//
// # The rule
//
// IPs are elected in groups. Two IPs are in one group when one Service holds both (the
// two families of a dual-stack Service) or when they are linked through a chain of such
// Services; Services sharing an IP are therefore always in one group. A group has one
// owner (or none), so a shared IP can never be announced by two nodes and both IPs of a
// dual-stack Service land on the same node.
//
// A Service of the group is active when
//   - its IP is in a pool (Service.Pool != ""),
//   - at least one L2Advertisement covers it: the ad announces the pool (AllPools or
//     Pool listed) and its ServiceSelectors select the Service (none = every Service),
//   - and at least one of its endpoints, on any node or none, can serve (CanServe).
//
// Inactive Services do not constrain the owner. A group without an active Service is not
// announced.
//
// A node is eligible when it is a live memberlist member, has a Node object, does not have
// NetworkUnavailable=True and does not carry the label ExcludeLabel (any value; unless
// View.IgnoreExcludeLabel). For each active Service an eligible node fits
//   - not at all when no ad covering the Service selects the node (NodeSelectors, none =
//     every node) — every covering ad counts, not only those of the local node, so every
//     speaker computes the same set;
//   - fully when the Service is externalTrafficPolicy Cluster;
//   - for Local: fully when the node has a ready endpoint of the Service, partly when its
//     local endpoints are only serving (terminating), not at all without a local endpoint.
//
// Candidates are the eligible nodes that fit at least one active Service, ranked by
//  0. leaving last: a node being emptied (Node.Leaving: cordoned, tainted out-of-service
//     or for deletion by the cluster autoscaler, shutting down) comes after every node
//     that is not, so its IPs move away, yet it still serves them when no other node can;
//  1. how many active Services they fit (partly or fully), more first;
//  2. how many they fit fully, more first (a node with a ready pod beats one whose pod is
//     terminating, so a rolling update moves the IP before the old pod is gone);
//  3. sha256(nodeName + "#" + key) compared as bytes, smaller first (NodeHash), where the
//     key is the smallest IP of the group (netip.Addr order, so IPv4 before IPv6; for a
//     lone single-stack Service it is its IP, for a dual-stack one its IPv4).
//
// Then the incumbent, the node View.Incumbents names for the group's IPs (the node
// announcing them now) when they all name the same eligible node, moves ahead of the
// best candidates (equal on ranks 0, 1 and 2) that it stands in for (Incumbent.Over): the
// owner is the first of the best that the incumbent does not stand in for, or the
// incumbent if it comes before. The first candidate owns every IP of the group; a
// Decision lists the first MaxCandidates.
//
// When all active Services of a group agree on the fitting nodes (the usual case: one
// Service, or sharing Services with the same ads and endpoints), ranks 1 and 2 tie and
// this is MetalLB's rendezvous hashing. When they disagree, the owner is a node that fits
// all of them if one exists (the intersection); otherwise the node fitting the most, and
// Decision.Unserved names the Services it cannot serve so the caller can warn. MetalLB's
// rule "a Service with allow-shared-ip matched by an ad with serviceSelectors is never
// announced" is not kept: it existed because MetalLB elects per Service and shared IPs
// could get two owners, which grouping makes impossible.
//
// A node's rank depends only on that node, the Services and the incumbent, never on the
// other members. Hence removing a node that is not the owner never moves an IP, and
// adding a node moves only the IPs it now ranks first for and whose incumbent does not
// stand in for it: the hash places a new IP (and an IP whose owner died, among the
// survivors), a node that comes back takes nothing back from the healthy owner that
// stood in for it, and a node new to the cluster takes its share. The incumbents come
// from the speakers themselves (each publishes the IPs it announces with the speakers
// it stands in for, speaker/claims.go), so every speaker that heard them elects the
// same owners.
//
// # Representation
//
// "Neither ipAddressPools nor ipAddressPoolSelectors set" is Advertisement.AllPools=true.
// With AllPools=false an empty Pools means the ad announces no pool (its selectors matched
// none); it never means "all". Empty NodeSelectors or ServiceSelectors select everything;
// a nil entry in them matches nothing. IPv4-mapped IPv6 addresses are unmapped first.
//
// # Determinism
//
// The result depends only on the contents of the inputs, not on the order of any slice
// nor on map iteration: members are a set, advertisements and endpoints are combined with
// order-free operations, Services are grouped by IP, and every output list is sorted.
// Decisions come sorted by IP. A node name listed twice in View.Nodes keeps the least
// eligible of its entries (NetworkUnavailable first, then excluded, then by labels), so
// even a duplicated Node cannot make two speakers disagree.
//
// # Layout
//
// types.go the inputs and the Decision; hash.go the ordering (NodeHash, Order);
// endpoints.go which endpoints can serve; nodes.go eligible nodes and what each ad
// selects; groups.go grouping IPs through the Services holding them; services.go which
// Services are active and which nodes fit them; elect.go ranking and the Decision;
// reason.go why an IP has no owner, as Event-ready text; bitset.go a small node set.
package election
