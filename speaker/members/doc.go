// Package members is the speakers' membership: a hashicorp/memberlist cluster of
// all speakers, used to tell which nodes are alive faster than the API server can.
// The election takes Live() as its member list.
//
// # Binding and encryption
//
// Each speaker binds memberlist to its node's IP (--ml-bind-addr, from the
// downward API status.hostIP; speakers run with hostNetwork) on --ml-bind-port
// (default 7946, TCP and UDP). The member name is the Node name.
//
// Gossip is always encrypted (AES-GCM, GossipVerifyIncoming and GossipVerifyOutgoing
// on). The key comes from the memberlist Secret (its format is internal/memberkey);
// Config.LoadKey reads the mounted entry (--ml-secret-key-path, DefaultKeyFile). A
// missing, empty or unreadable key is a startup error (ErrNoKey from Validate and
// Start): there is no plain-text mode.
//
// # Discovery
//
// memberlist only needs one live peer to join the whole cluster. This package does
// not discover anyone: the caller hands Join candidate addresses. The speaker takes
// the InternalIP of every Node (a speaker binds to its node's IP) at its own port,
// plus any --ml-peers, once before its first election and then periodically, so
// that new nodes and the halves of a healed partition find each other. Join filters
// the candidates with PeersToJoin (drops self and members already live), so repeated
// calls cost nothing once the cluster is whole.
//
// # Failure detection and changes
//
// The timings are flags (Config.AddFlags) with defaults tuned for sub-second
// detection on a LAN; DefaultConfig explains the arithmetic (≈0.5–0.75 s on three
// members) and the false-positive trade-off. Events delivers coalesced change
// notifications without ever blocking memberlist; on each, the speaker re-reads
// Live and re-runs the election. herald_memberlist_members is the number of live
// members this speaker sees, itself included.
//
// # Shutdown
//
// Leave tells the peers at once (about one gossip interval) that this member goes,
// so they take over its IPs without waiting for failure detection; Shutdown then
// stops memberlist.
//
// memberlist gives no quorum: a speaker cut off from the others sees them die. The
// speaker settles that with its records in the API server (speaker/quorum), not here.
package members
