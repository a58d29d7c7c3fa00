// Package handover keeps the connections open through a VIP working while the VIP
// moves on purpose (a cordoned node, a rebalance): make-before-break.
//
// When a live node gives a VIP up, the node taking it over knows nothing of the flows
// the old owner carries: their next segment would be proxied again, to some pod, which
// answers with a reset. So, before it answers for the VIP, the new owner forwards to
// the old owner every TCP segment to the VIP that it has no connection-tracking state
// for and that opens nothing (not a lone SYN). The old owner's kernel still holds those
// flows, NATs them as before and answers the client directly. New connections start
// with a SYN and stay on the new owner. The forwarding ends after the drain period, or
// as soon as the old owner is gone (then the flows fail as in any failover).
//
// The forwarding is one nftables base chain per VIP, in the tables "ip herald-handover"
// and "ip6 herald-handover", hooked in prerouting at mangle priority: before any NAT,
// whichever proxier (herald's or kube-proxy's, either mode) runs on the node. A matched
// segment is duplicated to the old owner's node address (nftables "dup", which sends
// the copy untracked, as is) and dropped, so it creates no state here. Each chain adds
// the flows it forwards to a set of its own, which counts them.
//
// UDP has no opening segment to tell a new flow from an old one: UDP "flows" move to
// the new owner with the VIP. SCTP associations are not forwarded either.
package handover
