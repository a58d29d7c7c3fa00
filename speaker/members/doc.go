// Package members is the speakers' membership: a hashicorp/memberlist cluster of
// all speakers, used to tell which nodes are alive faster than the API server can.
// The election (speaker/election) takes Live() as its member list.
//
// # Binding and encryption
//
// Each speaker binds memberlist to its node's IP (--ml-bind-addr, from the
// downward API status.hostIP; speakers run with hostNetwork) on --ml-bind-port
// (default 7946, TCP and UDP). The member name is the Node name.
//
// Gossip is always encrypted (AES-GCM, GossipVerifyIncoming and GossipVerifyOutgoing
// on). The controller creates the Secret holding the key when it is missing
// (NewSecretKey gives the value of its SecretKeyName entry); the speaker mounts it
// and reads it with ReadKeyFile / Config.LoadKey (--ml-secret-key-path,
// DefaultKeyFile). KeyFromSecretData turns the entry (base64 or raw) into a 32-byte
// AES-256 key with SHA-256. A missing, empty or unreadable key is a startup error
// (ErrNoKey from Validate and Start): there is no plain-text mode.
//
// # Discovery
//
// memberlist only needs one live peer to join the whole cluster. The speaker finds
// candidates through the API server: it watches the speaker Pods (its own
// DaemonSet's label selector, in its namespace) and takes their status.hostIP
// (equal to the node IP under hostNetwork) of Pods that are Running. It calls
// Join with those addresses at start, whenever the set of speaker Pods changes, and
// periodically (e.g. every 30 s) to heal partitions that memberlist's own push/pull
// could not (two halves that forgot each other). Join filters the candidates with
// PeersToJoin (drops self and members already live), so repeated calls cost
// nothing once the cluster is whole. Readiness waits for the first Join to reach a
// peer, or for there being no other speaker.
//
// # Failure detection and changes
//
// The timings are flags (Config.AddFlags) with defaults tuned for sub-second
// detection on a LAN; DefaultConfig explains the arithmetic (≈0.6–0.9 s below ten
// members) and the false-positive trade-off. Events delivers coalesced change
// notifications without ever blocking memberlist; on each, the speaker re-reads
// Live and re-runs the election. herald_memberlist_members is the number of live
// members this speaker sees, itself included.
//
// # Shutdown
//
// On SIGTERM the speaker calls Leave (peers drop it at once, about one gossip
// interval, and take over its VIPs), then stops announcing, then Shutdown.
//
// # Split brain
//
// memberlist gives no quorum: a speaker cut off from the others sees them die and,
// alone, would elect itself for every IP. The speaker therefore elects from Live only
// while it hears a majority of the speakers, and settles the other cases through the
// speakers' records in the API server (speaker/quorum).
package members
