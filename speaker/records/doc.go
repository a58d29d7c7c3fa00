// Package records is the speakers' memory in the API server: each speaker's record
// and heartbeat, how a speaker writes its own and reads its peers', and the
// controller's digests of them that spare the API server in large clusters. The
// quorum rule (speaker/quorum) decides on what this package reads; the speaker
// (package speaker) tells it what to write. The format of the Leases is
// internal/recordformat's and internal/beatsummary's, which herald's controller reads
// and writes too.
//
// # The record and the heartbeat
//
// Every speaker keeps a record of itself: a Lease named herald-speaker-<node> (Name)
// in herald's namespace, whose annotations say the memberlist members it hears, the
// expected speakers it does not hear, its quorum mode and the MACs its ARP/NDP
// responders answer with (another speaker seeing one of them answer for its IP knows
// it is a peer, not a foreign device). The record changes only when what it says
// does. The speaker's liveness is a second Lease, its heartbeat
// herald-heartbeat-<node> (HeartbeatName), renewed like a kubelet's node lease
// (Config.Renew); it also carries the fingerprints of the memberlist keys the speaker
// holds. The Node owns both, so deleting the Node deletes them; a speaker stopping
// gracefully deletes them itself (Keeper.Remove), so that its peers stop expecting it
// at once.
//
// # Writing
//
// The speaker says what its record should say after each decision (Keeper.Want, a
// Wish); Keeper.Run writes it in a goroutine of its own, so that an unreachable API
// server never delays an election, and retries every Config.FastRenew after a failed
// write. A change of mode is written at once. A change of view (whom it hears), or a
// peer newly asking whether this speaker is alive (quorum.AskedBy: the renewal is the
// answer), within Config.Coalesce of the last write waits for that window to end and
// goes in one write with what changed meanwhile: a split makes memberlist lose the
// other side's peers, and them start asking, in batches, each of which would
// otherwise cost a write reaching every speaker out of Quorum. Each write is counted
// by its reason (herald_speaker_record_writes_total). Writes carry no managedFields:
// nothing reads them, and the API server would repeat every label and annotation in
// them, in every version stored and every watch event sent.
//
// A speaker remembers the etcd revisions its latest writes got and when it made them
// (ownwrites.go). A version of a peer's record with a higher revision was written
// after that write, whenever this speaker read it: so a version read from a list
// still tells a peer's answer to a record this speaker wrote from what the peer wrote
// before.
//
// # Labels
//
// A record's labels repeat what the API server needs to send each speaker only the
// records that concern it: one label per speaker its writer knows of and does not
// hear (MissesLabel), and its mode (ModeLabel). The labels name the speakers missed,
// not those heard: in steady state (everyone hears everyone) a record carries no
// misses label at all, and a death, which rewrites every survivor's record, changes
// few labels. The speakers a writer knows of are the writers of the records it has
// seen, the members it has heard since it started and those it expects; every speaker
// that may read its record while in Quorum is among them, so a record that does not
// list a reader carries the reader's misses label (Keeper.Misses). A record whose
// Node is gone, and whose writer is not expected, is forgotten: a speaker in Quorum
// may never see that record's deletion. Records of an older format carry a hears
// label per member and their mode under another key: lacking ModeLabel they are in
// trouble to a newer speaker's selector, which so sees each of them while a cluster
// is upgraded; a newer speaker rewriting its record drops both.
//
// # Which records a speaker reads
//
// Every speaker watching every record would cost, at each membership change, N writes
// sent to N watchers: a death rewrites every survivor's record. But a speaker that
// hears a majority needs, of the others' records, only
//   - those that leave it out: a majority without it deposes it (quorum rule 2);
//   - those of speakers in trouble (any mode but Quorum): a peer holding or
//     arbitrating asks everyone to show it is alive (quorum.AskedBy);
//   - those of the peers it does not hear: whether they are alive, and whether their
//     record lists it (which vouches for it against a majority without it).
//
// The record of a peer it hears, that lists it and hears a majority, tells it nothing
// more: the peer is alive (memberlist says so) and does not depose it. So a speaker in
// Quorum watches the records that carry its misses label (a selector the API server
// evaluates: a record that starts listing it leaves the watch with one event), those
// whose mode label is not Quorum, and by name the records of the peers it does not
// hear; for each other writer it knows, it stands in a record that lists it, in
// Quorum, renewed now. A death rewrites every survivor's record, and none of those
// writes reaches a survivor. Its cache holds no record (CacheScope).
//
// A speaker out of Quorum (in trouble, silent, starting) needs every record, to count
// who is alive and whom each hears: it watches them all until it has been back in
// Quorum for a linger, and reads them straight from the API server until that watch
// has synced. Meanwhile the narrow watches and those by name are stopped: they would
// repeat to it every write the wide one brings. They start again when the linger
// ends, and the wide watch stops only once they have synced. Watches by name start at
// a limited pace and stop a while after they are no longer needed, so that a member
// flapping does not restart them each time. Each watch's events are counted
// (herald_speaker_record_events_total); the watches running are shown by
// herald_speaker_record_watches.
//
// # The records digest
//
// In a large cluster a speaker out of Quorum reads the records digest instead of every
// record: one ConfigMap that herald's controller writes from its own watch of the
// records (internal/recordformat). It uses it while it is usable (written within
// recordformat.DigestDuration, as of this speaker's last successful write while its
// writes fail) and lists at least Config.DigestFrom records; otherwise, or until its
// watch has synced, it watches every record as before, so a controller that is down
// or cut off costs what herald cost without the digest. A speaker in Quorum reads it
// too while the records that concern it are many (Config.SummaryFrom or more: a split
// forming), and it stands in for the records of unheard peers whose watches by name
// have not synced, which would otherwise be read one by one from an API server the
// split keeps busy.
//
// # Liveness: the heartbeats and their summary
//
// A speaker needs a peer's heartbeat only while it cannot hear that peer over
// memberlist: hearing it says it is alive (Keeper.Live counts a heard peer's record as
// renewed now). It watches, by name, the heartbeats of the peers it does not hear; or,
// once it does not hear Config.SummaryFrom of them, the heartbeat summary that
// herald's controller writes (internal/beatsummary): one Lease saying which heartbeats
// are fresh, rewritten only when one turns fresh or stale and renewed on a timer so
// that its readers can tell it is current. A watch of a live peer's heartbeat brings
// an event per renewal and a dead peer's none; the summary brings one per renewal, of
// a bigger object, whatever it says. So a few unheard peers (a node down, one cut
// off) are cheapest by name, and many (an even split: N/2 each, every renewal of one
// side reaching each speaker of the other) only through the summary. While the summary is missing or stale (the
// controller down or cut off) the heartbeats are watched by name whatever their
// number. In steady state every speaker hears every other and watches neither.
//
// A heartbeat not known yet counts as fresh, which only delays a majority, never makes
// one; and a peer that stops renewing stays fresh for the record duration minus a
// renewal period. So a watch that starts a few seconds after its peer went unheard
// changes no decision, and spares the API server what a speaker starting (it hears
// nobody until memberlist's join) or a member flapping would cost: the summary is
// watched once some peer has been unheard for a moment, a peer's heartbeat (the
// summary being unusable) a little later, at a limited pace, and a watch stops only
// once its peer has been heard again for a while. The summary's watch starts first so
// that, when it is usable, no heartbeat's watch starts at all.
//
// # Reading afresh after a silence
//
// A speaker back from silence reads every record afresh before it announces again
// (quorum: the records as they stood after its silence began, not as a watch that may
// lag holds them). Listed from the API server, that is every record's bytes to each
// such speaker, at the moment a split heals. The records digest in use serves instead
// when it can be shown to hold the records as they stood after the silence began
// (Keeper.ListAfresh, herald_speaker_record_reads_total by source):
//   - the controller writes the digest from one snapshot of its watch of the records,
//     which brings every write in the order of its etcd revision, so the digest holds
//     every record as it stood once the write of the highest revision it lists (R)
//     was made;
//   - etcd gives revisions in the order writes are made, across every object, so a
//     write of this speaker's (its record or its heartbeat) that got a revision of R
//     or lower was made before that;
//   - if this speaker began that write after its silence began (by its own clock),
//     the digest is as good as a list made then, which is all a read afresh promises.
//
// Otherwise it lists them from the API server.
//
// # When a record changed
//
// The quorum rule asks when each record last changed as this speaker saw it
// (quorum.Record.ChangedAt). A version seen in a watch event is stamped with the time
// it arrived; one read from a list, which tells nothing of when, with the last change
// this speaker saw of that record, or with the latest of its own writes that precedes
// it, or the zero time: stamping it with the time of the read would make an old record
// look like a live speaker's answer. Versions seen before the first decision
// (Keeper.Decided) are what the records were at start-up, not changes. Each version
// is parsed once: a speaker lists every record before each decision.
//
// # Reaching back to the speaker
//
// The package never imports the speaker. It reaches back only through what New is
// given: Options.PokeElection (what it reads changed: decide again),
// Options.PeerMACs (the MACs a peer's record lists, for telling a peer's frames from a
// foreign device's), Options.KeysReport (the memberlist keys, for the heartbeat) and,
// once memberlist runs, Keeper.SetHeard (whether a node is heard over memberlist).
package records
