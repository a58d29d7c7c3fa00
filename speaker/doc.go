// Package speaker is `herald speaker`, the agent on every node. Run (run.go) assembles
// it: the informers, memberlist (speaker/members), the records in the API server
// (speaker/records), the ARP/NDP announcer (speaker/layer2), the embedded proxier
// (proxy/); it runs each as a stage (stage.go) it stops in the order a graceful stop
// needs, and runs the loop (loop.go), which runs an election pass on every change.
// speaker.go declares the Speaker and the groups its memory is kept in; it depends on
// no file that depends on it, so the files of the package form no cycle.
//
// One pass (pass.go, runElection) reads the membership snapshot, lets the quorum rule
// (speaker/quorum) decide whom to elect among (verdict.go, which also publishes this
// speaker's record), reads the cluster from the informers (view.go), elects the owner
// of every LoadBalancer IP (speaker/election) with the claims of who announces what as
// incumbents (speaker/claims), keeps the IPs of restarting peers for them (restart.go,
// sparerestarting.go), withholds the endpoints of dead nodes (speaker/withhold), and
// makes the announcer and the metrics follow the plan (tracker.go, apply.go). Users
// see the outcome in Events (reporter.go, nodeevents.go) and VIPStatus objects
// (speaker/vipstatus).
//
// Around the pass: joining the other speakers (join.go), the memberlist key (key.go,
// keyfollow.go), what the wire shows (conflicts.go: peers, whose MACs peers.go
// keeps, and foreign devices answering for an owned IP), a stall of the process (stall.go), the proxier's feed
// (proxier.go), the token's node binding (tokenbinding.go). The loop reaches
// memberlist, the records and the announcer through the interfaces of seams.go; the
// packages below it reach back only through the callbacks they are given.
//
// Headless (headless.go) is the loop without the announcer, the proxier, Events and
// metrics, built the same way (newSpeaker); the scale benchmarks (speaker/scale) run
// hundreds of them in one process.
package speaker
