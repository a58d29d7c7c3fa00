// Package quorum decides whether a speaker may trust its own memberlist view to elect
// owners, and if not, what it does instead. It is pure: plain values in (Input, State),
// plain values out (Verdict, State); no client, no clock, no I/O.
//
// memberlist tells a speaker which peers answer it, fast, but not whether the peers it
// cannot hear are dead or merely cut off. Electing among the peers one hears is right
// in the first case and a split brain in the second: the cut-off side elects itself for
// every IP while the rest of the cluster hands the same IPs to other nodes. The rule
// below keeps memberlist the fast path whenever a majority of speakers hear each other,
// and uses the API server, where every speaker publishes a small record (a Lease), only
// to settle what memberlist cannot.
//
// # Records
//
// Every speaker keeps a Record in the API server: the memberlist members it hears, its
// Mode, and when it was last renewed. It writes it when its view or mode changes or
// when a peer starts asking whether it is alive (AskedBy): an announcing peer's record
// lists it as unreachable, or a peer holds or arbitrates. Its liveness is renewed
// apart (every 10 s, a kubelet's pace) and only the speakers that do not hear it over
// memberlist read it (through the controller's summary of every heartbeat while that
// is current): to a reader, the record of a peer it hears is renewed now, and
// that of a peer it does not hear as of the later of the record's write and that
// renewal (see speaker/records). Readers note when each record last changed by
// their own clock, and a change after they lost its writer, or after their trouble
// began, shows it alive; one write answers, whatever the trouble's length. So speakers in trouble can
// tell live peers from dead ones through the API server, and a node that dies makes
// nobody write more. A speaker that leaves gracefully
// deletes its record; the records of deleted Nodes are garbage-collected with them.
//
// # The rule
//
// The expected speakers E are this one, those it hears, and those whose record is fresh
// (renewed within its duration). While this speaker cannot write its own record (the API
// server is unreachable from it), freshness is judged as of its last successful write,
// so that records do not expire merely because nobody can renew them. In order:
//
//  1. Isolated: the interface memberlist runs on has lost its carrier. Announce nothing:
//     the peers take this node's IPs over and it cannot serve them anyway.
//  2. Minority: some announcing speaker's current record publishes a majority of E
//     that excludes this speaker, and no member of that majority publishes a record
//     that includes it. Those speakers elect among themselves, fast, and serve every
//     IP; this one announces nothing. A silent writer deposes nobody: it serves no IP,
//     and a node back from a cut publishes, for a moment, a majority without the peers
//     it has not heard again yet. A record is current unless its writer rejoined this speaker's
//     memberlist view after writing it, more than JoinWait ago: a record written before
//     the writer heard this speaker again still deposes it for JoinWait, which is what
//     makes a returning node wait until its peers have given its IPs back (they
//     republish once they hear it), so two nodes never answer at once. Which node
//     is returning is told by who heard a majority before the join: a writer that
//     joined this speaker's view less than JoinWait ago is outvoted by the members
//     that list this speaker only if this speaker already heard a majority before
//     that join (the writer is the one back, its view merely behind); otherwise it
//     deposes regardless, whatever the others say. A majority of
//     writers this speaker hears, while it hears a majority itself, deposes it only
//     once their records have said so for Grace: that is a rumour of its death (a
//     member back from a partition passes on the deaths it declared while cut off),
//     refuted a moment later; the majority's new owners wait for it to stop answering
//     meanwhile, so nothing is answered twice. The same wait holds for writers it no
//     longer hears, if their records left it out while it was in Quorum all along
//     (State.QuorumSince): two peers each believing a rumour of the other's death.
//  3. Quorum: it hears a strict majority of E. It elects among the members it hears,
//     as memberlist reports them, with no API round trip.
//  4. Rejoining: it was silent, and a majority's current records list it while it
//     does not hear that majority yet: a heal reaches its peers first. They serve its
//     IPs, under their claims, until it hears them; if it arbitrated meanwhile it would
//     elect with the claims it knew when it was cut off and take IPs they announce. At most JoinWait, for
//     a one-way cut.
//  5. Hold: no majority, for less than Grace. It keeps the IPs it announces and takes
//     no new one: the usual cause, a peer that just died, and the rarer one, a split,
//     look the same for the first moments.
//  6. Arbitrated: no majority for Grace or longer and the API server reachable. It
//     elects among the speakers whose record changed after it lost its majority: the
//     speakers that are alive and reach the API server, the same set on every side of
//     the split, so every side elects the same owners. Every speaker renews its record
//     as soon as it sees one in Hold or Arbitrated.
//  7. Isolated: no majority for Grace or longer and the API server unreachable. It
//     announces nothing; whoever can still reach the API server arbitrates.
//
// A speaker that announced nothing (Isolated, Minority, or just started) serves again
// only after it read the records straight from the API server, after it went silent
// (Input.RecordsReadAt): a cache that lagged while the cable was out must not let it
// take back IPs that its peers hold. Back in a majority, it stays silent (ModeRejoining)
// until every announcing peer's record lists it and it hears each of them, at most
// JoinWait: the peer that stood in for it releases once it hears it, and republishes
// only then; and its own record says it announces nothing until it hears everyone, so
// that a peer it has not heard yet does not take the record for a majority deposing
// it (memberlist reaches a returning node's peers one by one). It also waits, at most
// JoinWait, to hear each peer whose record says ModeRestarting: a speaker started
// with claims to take back, which speakers started at the same moment would
// otherwise elect without.
//
// # Guarantees
//
// While the API server is reachable from both sides of a memberlist split, every IP is
// announced by exactly one node once Grace has passed. Before that, the rule alone
// would let the majority take a cut-off node's IPs at detection, while that node still
// answers until the majority's records reach it; the speaker closes that window on the
// wire: an IP whose owner was lost without leaving is taken only once a probe finds no
// speaker answering for it (speaker/layer2 WaitForPeers). Without the API server, a
// majority still elects alone and a minority stays silent; an even split keeps what it
// had (Hold) and then goes silent where it cannot reach the API server.
package quorum
