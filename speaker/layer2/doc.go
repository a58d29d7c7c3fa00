// Package layer2 makes LoadBalancer IPs reachable on the LAN from the node that owns
// them: it answers ARP (IPv4) and IPv6 neighbour solicitations for those IPs and
// announces them with gratuitous ARP and unsolicited neighbour advertisements when the
// node takes them over. It notices other devices answering for those IPs and, rather
// than fight a foreign one, stops answering until it is gone.
//
// The pieces, one file each:
//
//   - Table (owners.go): which IPs this node owns, on which interfaces, and which are
//     quiet (probed or yielded); read for every packet, written by Set and Withdraw.
//   - Eligible (eligible.go, sysfs.go): which interfaces get responders — up and running,
//     not loopback, NOARP, a bond/bridge slave, or matched by the exclude regex
//     (DefaultExcludeInterfaces: veth*, cali*, flannel*, cni*, docker*, lo, ...).
//   - ARPResponder (arp.go): one per interface over a Conn of raw Ethernet frames;
//     answers requests for owned IPs with the receiving interface's MAC, reports claims
//     and sends probes.
//   - NDPResponder (ndp.go, ipv6frame.go): one per interface over an NDPConn; joins the
//     solicited-node group of each owned IPv6 VIP and answers solicitations, including
//     unicast reachability probes sent to the VIP itself; reports advertisements that
//     claim a VIP and sends duplicate address detection probes.
//   - Schedule and the takeover loop (schedule.go, takeover.go): gratuitous frames at
//     once, repeated past Linux's ARP locktime, then refreshed periodically; stopped by
//     Withdraw before it returns.
//   - Announcer (announcer.go, interfaces.go): ties them together for the speaker — Set,
//     Withdraw, Run (interface rescans) — and reports each takeover's first frame.
//   - ListenARP, ListenNDP (conn.go): the real AF_PACKET sockets, with kernel filters.
//   - Claims and conflicts (sighting.go, conflict.go): other devices saying they hold an
//     owned IP, and the announcer's rules for them, below.
//
// # Address conflicts
//
// A claim (seen on the wire: a Sighting) is a frame from a MAC that is not one of
// this node's responders' saying it holds an IP this node owns on the receiving
// interface: an ARP request or reply whose
// sender IP is the owned IP (gratuitous or not), or a neighbour advertisement for the
// owned VIP (the claimer is its Target Link-Layer Address, else the Ethernet source).
// The frame must come from the MAC it names (Ethernet source = ARP sender hardware
// address or NA Target Link-Layer Address): else it is dropped as "sender-mismatch"
// and counts for nothing, so a forger cannot speak in another device's name.
// Probes only ask and are answered as before: ARP with sender IP 0.0.0.0, DAD from ::.
// Every claim is counted in herald_l2_foreign_claims_total{ip}, dropped unanswered
// (reason "claim") and reported to Config.OnSighting, marked Peer if Config.Peer says the
// MAC is another herald speaker's. The rules, per IP:
//
//   - Peers never make a node yield: their claims are evidence of a split brain, which
//     the speaker's membership settles. The rules below are for foreign devices.
//   - Defend once, then yield (RFC 5227 §2.4): the first foreign claim is answered with
//     one gratuitous announcement and one probe; a second foreign claim within
//     DefendInterval (10 s) makes the node yield. A host holding the IP answers the
//     probe even if it never announces itself, so a live conflict is settled at once,
//     without a gratuitous-ARP war.
//   - Yielded: the IP stays owned (Set/Withdraw as before) but quiet: requests for it are
//     dropped (reason "suppressed") and nothing is announced. OnConflict reports it,
//     Announcer.Conflict returns it, herald_l2_conflict{ip,mac} is 1. A yield covers the
//     IP on every interface, whichever one the claim came in on.
//   - Recovery: a yielded IP gets a probe round ConflictRecheckFirst (1 s) after the
//     yield, then after waits doubling up to ConflictRecheck (8 s) while the device
//     answers: two probes ProbeWait/2 apart, listening for ProbeWait (200 ms). No foreign
//     answer clears the conflict (OnConflictCleared, the gauge goes) and the schedule
//     starts from its first announcement. For a yielded IP, Reannounce and a new
//     interface bring the probe round forward.
//   - Bounded yield: a device that still answers ConflictYieldMax (10 s) after the
//     yield (a forger answering every probe) does not keep the IP silent longer. The
//     node takes it back, contested: it answers the IP and announces it once, keeps
//     the conflict (gauge, Announcer.Conflict with Contested set, no new OnConflict),
//     never yields it again to further claims, and defends it with at most one
//     announcement per DefendInterval. Probe rounds go on as while yielded; one that
//     goes unanswered clears the conflict (herald_l2_conflict_takebacks_total counts
//     the takebacks).
//   - Probe before the first announcement: a Set with Probe, for an IP no node announced
//     before, keeps the IP quiet through one probe round; a foreign answer yields it
//     with no gratuitous frame ever sent (Conflict.BeforeAnnounce). A peer's answer
//     keeps it quiet for the round, and rounds go on until no peer answers.
//   - Wait for peers before a takeover: a Set with WaitForPeers, for an IP whose owner
//     was lost without leaving, keeps the IP quiet through rounds of PeerProbeWait
//     (50 ms) until one goes unanswered by any speaker: a cut-off owner that still
//     answers keeps the IP until it goes silent, so the IP never has two MACs
//     (herald_l2_takeovers_deferred_total counts the waits). The wait lasts at most
//     PeerWaitMax (10 s): a dead node's MAC in a forger's frames cannot hold a
//     takeover longer (herald_l2_peer_waits_expired_total).
//   - Withdraw ends the loop and the gauge of a yielded IP, without OnConflictCleared.
//
// Metrics (metrics.go) are registered on the Registerer the caller passes in:
// herald_l2_arp_requests_total, herald_l2_arp_replies_total,
// herald_l2_gratuitous_sent_total, herald_l2_ndp_solicitations_total,
// herald_l2_ndp_advertisements_total, herald_l2_probes_sent_total,
// herald_l2_takeovers_deferred_total, herald_l2_peer_waits_expired_total,
// herald_l2_conflict_takebacks_total,
// herald_l2_replies_rate_limited_total,
// herald_l2_foreign_claims_total{ip}, herald_l2_conflict{ip,mac} and
// herald_l2_dropped_frames_total{reason}. Malformed or foreign frames are dropped and
// counted, never a crash.
package layer2
