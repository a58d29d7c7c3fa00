// Package layer2 makes LoadBalancer IPs reachable on the LAN from the node that owns
// them: it answers ARP (IPv4) and IPv6 neighbour solicitations for those IPs and
// announces them with gratuitous ARP and unsolicited neighbour advertisements when the
// node takes them over.
//
// The pieces, one file each:
//
//   - Table (owners.go): which IPs this node owns and on which interfaces; read for every
//     packet, written by Set and Withdraw.
//   - Eligible (eligible.go, sysfs.go): which interfaces get responders — up and running,
//     not loopback, NOARP, a bond/bridge slave, or matched by the exclude regex
//     (DefaultExcludeInterfaces: veth*, cali*, flannel*, cni*, docker*, lo, ...).
//   - ARPResponder (arp.go): one per interface over a Conn of raw Ethernet frames;
//     answers requests for owned IPs with the receiving interface's MAC.
//   - NDPResponder (ndp.go, ipv6frame.go): one per interface over an NDPConn; joins the
//     solicited-node group of each owned IPv6 VIP and answers solicitations, including
//     unicast reachability probes sent to the VIP itself.
//   - Schedule and the takeover loop (schedule.go, takeover.go): gratuitous frames at
//     once, repeated past Linux's ARP locktime, then refreshed periodically; stopped by
//     Withdraw before it returns.
//   - Announcer (announcer.go, interfaces.go): ties them together for the speaker — Set,
//     Withdraw, Run (interface rescans) — and reports each takeover's first frame.
//   - ListenARP, ListenNDP (conn.go): the real AF_PACKET sockets, with kernel filters.
//
// Metrics (metrics.go) are registered on the Registerer the caller passes in:
// herald_l2_arp_requests_total, herald_l2_arp_replies_total,
// herald_l2_gratuitous_sent_total, herald_l2_ndp_solicitations_total,
// herald_l2_ndp_advertisements_total and herald_l2_dropped_frames_total{reason}.
// Malformed or foreign frames are dropped and counted, never a crash.
package layer2
