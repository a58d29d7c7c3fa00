package e2e

// One answer on the wire: whatever memberlist sees (a node cut off from its peers,
// every speaker cut off, the cluster split in two halves, a cable pulled and plugged
// back), a client on the LAN asking who has a LoadBalancer IP gets at most one answer
// to each request, and an IP that was served stays served. The client asks for every
// VIP every 10 ms and each request is judged by the MACs that answered it
// (lab.ARPWatch.Summary). The partitions are iptables rules inside the nodes'
// namespaces dropping memberlist's port only: the API server stays reachable.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
)

const (
	// partitionGrace is how long after a memberlist fault begins a VIP may go
	// unanswered for longer than maxSilence: the majority must first detect the loss,
	// which took longest in a loaded five-worker lab. Two answers to one request are
	// never tolerated, from the first moment of the fault: the cut-off node goes silent
	// one API write after detection and the new owners probe before they announce.
	// The product's promise.
	partitionGrace = 2500 * time.Millisecond
	// maxSilence is the longest a served VIP may go unanswered: a failover's length.
	// The product's promise.
	maxSilence = 1500 * time.Millisecond
	// afterHeal is how long after a fault is undone every request must still get one
	// answer while the speakers meet again. The product's promise.
	afterHeal = 5 * time.Second
	// partitionFor is how long the partitions last: many times memberlist's failure
	// detection (under a second, speaker/members), so each side has long declared the
	// other dead.
	partitionFor = 8 * time.Second
	// httpProbeTimeout bounds each request of the cable test's HTTP probes.
	httpProbeTimeout = 300 * time.Millisecond
	// arpEvery is how often the client asks for each VIP.
	arpEvery = 10 * time.Millisecond
	// splitPrefix names the even-split tests' own labs, apart from the shared one.
	splitPrefix = "hp-"
)

// TestLabPartitionOneNode cuts the owner of a VIP off from memberlist for a while; it
// still reaches the API server and the LAN.
func TestLabPartitionOneNode(t *testing.T) {
	f := fullLabFor(t)
	const cut = "worker3"
	vips := maps.Clone(f.vips)
	_, vips["partitioned"] = f.serviceFirstFor(t, "partitioned", cut)
	f.expectOwners(t, vips, "before the partition")
	ws := f.watchVIPs(t, vips)

	start := time.Now()
	writes := f.recordWrites(t, start.Add(partitionFor))
	heal := inflict(t, func(ctx context.Context) error { return f.s.PartitionMemberlist(ctx, cut) },
		func(ctx context.Context) error { return f.s.HealMemberlist(ctx, cut) })
	time.Sleep(partitionFor)
	healAt := time.Now()
	heal()
	time.Sleep(afterHeal)

	// A speaker writes its record when what it says changes and once when a peer
	// starts asking whether it is alive, whatever the cut's length: a handful of writes
	// each over the cut (it was two a second each, for as long as the cut lasted). The
	// cut node's own changes of mode (Hold, then Minority) must show.
	seen := writes()
	for _, n := range f.nodes {
		got := len(seen[n])
		t.Logf("FIGURE record writes of %s in the first %s of the cut: %d", n, partitionFor, got)
		switch {
		case n == cut && got < 2:
			t.Errorf("%s, cut off, wrote its record %d times in %s; want at least its Hold and Minority", n, got, partitionFor)
		case got > 5:
			t.Errorf("%s wrote its record %d times in %s while %s was cut off; want a write per change of its view or mode and per new asker, not a steady pace", n, got, partitionFor, cut)
		}
	}

	during := cut + "'s memberlist partitioned"
	f.expectOneAnswer(t, ws, start, start, healAt, during)
	f.expectServed(t, ws, start, start.Add(partitionGrace), healAt, during)
	f.expectOneAnswer(t, ws, start, healAt, healAt.Add(afterHeal), "the partition healed")
	// The majority took the cut node's VIPs over; it takes nothing back (no fail-back).
	f.expectOwners(t, vips, "after the heal", without(f.nodes, cut)...)
}

// TestLabPartitionEverySpeaker drops memberlist on every node, as an install whose
// firewall blocks port 7946 does.
func TestLabPartitionEverySpeaker(t *testing.T) {
	f := fullLabFor(t)
	vips := maps.Clone(f.vips)
	f.expectOwners(t, vips, "before the partition")
	ws := f.watchVIPs(t, vips)

	start := time.Now()
	writes := f.recordWrites(t, start.Add(partitionFor))
	heal := inflict(t, func(ctx context.Context) error { return f.s.PartitionMemberlist(ctx, f.nodes...) },
		func(ctx context.Context) error { return f.s.HealMemberlist(ctx, f.nodes...) })
	time.Sleep(partitionFor)
	healAt := time.Now()
	heal()

	// Everyone holds, then arbitrates: each speaker writes at each change of its view
	// and mode and once per peer that starts holding or arbitrating, then renews at the
	// slow pace (it was two writes a second each, for as long as the split lasted).
	seen := writes()
	for _, n := range f.nodes {
		got := len(seen[n])
		t.Logf("FIGURE record writes of %s in the first %s of the split: %d", n, partitionFor, got)
		if got < 2 || got > 8 {
			t.Errorf("%s wrote its record %d times in %s with every speaker cut off; want its Hold and Arbitrated and a write per new asker, not a steady pace", n, got, partitionFor)
		}
	}

	during := "every speaker's memberlist partitioned"
	f.expectOneAnswer(t, ws, start, start, healAt, during)
	// Whether the VIPs stay served with no speaker hearing another is a design choice:
	// herald arbitrates through the API server, which every node still reaches here.
	t.Run("served while partitioned", func(t *testing.T) {
		f.expectServed(t, ws, start, start.Add(partitionGrace), healAt, during)
	})
	// Which node holds each VIP after the heal depends on how the sides arbitrated
	// while the split formed; with no fail-back it keeps it. One MAC each, always.
	for _, name := range slices.Sorted(maps.Keys(vips)) {
		f.watchUntil(t, vips[name], name+" after the heal", "exactly one MAC", func(macs []string) bool { return len(macs) == 1 })
	}
}

// vipWithStandIn creates the Service name, whose VIP the hash places on first, and
// pulls first's cable and plugs it back: the node next in line takes the VIP over and
// keeps it (no fail-back). It returns the VIP by name and that stand-in. first must run
// no pod, so that the VIP's requests succeed with its cable pulled.
func (f *fullLab) vipWithStandIn(t *testing.T, name, first string) (map[string]netip.Addr, string) {
	t.Helper()
	vips := map[string]netip.Addr{}
	_, vips[name] = f.serviceFirstFor(t, name, first)
	standIn := f.owner(vips[name], without(f.nodes, first)...)
	f.expectOwners(t, vips, "before the cable pull")
	plug := inflict(t, func(ctx context.Context) error { return f.s.LinkDown(ctx, first) },
		func(ctx context.Context) error { return f.s.LinkUp(ctx, first) })
	f.expectOwners(t, vips, "with "+first+"'s cable pulled", without(f.nodes, first)...)
	plug()
	time.Sleep(afterHeal) // first is a member again, and has heard standIn's claim
	f.expectOwners(t, vips, "after "+first+"'s cable was plugged back", without(f.nodes, first)...)
	return vips, standIn
}

// freezeFor is how long TestLabSpeakerFreeze keeps a speaker frozen: long enough for
// its peers to declare it dead and move its VIP (under a second), as with a paused VM.
const freezeFor = 4 * time.Second

// TestLabSpeakerFreeze freezes a speaker (SIGSTOP: a stalled process, a paused VM or
// container) that announces a VIP as a stand-in, until its peers have declared it dead
// and the VIP has gone back to the node the hash places it on, then thaws it (SIGCONT).
// The thawed speaker still believes it owns the VIP, with its old claim saying it stands
// in for that node, and its socket still holds the ARP requests queued while it was
// frozen. It must answer none of them, nor a new one, before it has heard its peers
// again, and must then leave the VIP where it is: exactly one MAC answers every request
// from the freeze on, only the hash's node from the thaw on, and no HTTP request fails
// from the thaw on.
func TestLabSpeakerFreeze(t *testing.T) {
	f := fullLabFor(t)
	const first = "worker3"
	vips, standIn := f.vipWithStandIn(t, "freeze", first)

	ws := f.watchVIPs(t, vips)
	probe := lab.StartHTTPProbe(f.clientNS, "http://"+vips["freeze"].String()+"/", 20*time.Millisecond, httpProbeTimeout)
	t.Cleanup(probe.Stop)
	freezeAt := time.Now()
	thaw := inflict(t, func(context.Context) error { return f.s.FreezeSpeaker(standIn) },
		func(context.Context) error { return f.s.ThawSpeaker(standIn) })
	f.expectOwners(t, vips, "with "+standIn+"'s speaker frozen", without(f.nodes, standIn)...)
	time.Sleep(time.Until(freezeAt.Add(freezeFor)))
	thawAt := time.Now()
	thaw()
	t.Logf("%s's speaker thawed %s", standIn, sinceFault(thawAt, freezeAt))
	time.Sleep(time.Until(thawAt.Add(afterHeal)))
	end := time.Now()
	time.Sleep(time.Second) // the probe's requests under way at end finish

	f.expectOneAnswer(t, ws, freezeAt, freezeAt, end, standIn+"'s speaker frozen and thawed")
	h, err := f.s.Host(first)
	if err != nil {
		t.Fatal(err)
	}
	firstMAC := h.MAC
	if after := ws[0].arp.Summary(thawAt, end); !slices.Equal(after.MACs, []string{firstMAC}) {
		t.Errorf("from the thaw on, %s was answered by %s; want %s alone (the VIP stays where it is)",
			vips["freeze"], f.describeMACs(after.MACs), f.describeMACs([]string{firstMAC}))
	}
	expectNoHTTPFailure(t, probe, "freeze", vips["freeze"], thawAt, end, standIn+"'s speaker was thawed")
}

// TestLabCablePullNoDoubleAnswer pulls the cable of a VIP's owner and plugs it back:
// no request is answered twice, the node that comes back takes nothing back (no
// fail-back), so no HTTP request fails from the plug on, and the leader changes count
// the real moves only: one per VIP the pulled node owned.
func TestLabCablePullNoDoubleAnswer(t *testing.T) {
	f := fullLabFor(t)
	ctx := t.Context()
	// worker3 runs no pod: with its cable pulled, requests to every VIP can still
	// succeed (TestLabFailover).
	const pulled = "worker3"
	vips := maps.Clone(f.vips)
	_, vips["cable"] = f.serviceFirstFor(t, "cable", pulled)
	f.expectOwners(t, vips, "before the cable pull")
	for _, name := range slices.Sorted(maps.Keys(vips)) {
		f.expectCurls(t, "http://"+vips[name].String()+"/", 10, name+" before the cable pull")
	}
	// Each VIP's real moves: to the next node of its election, and not back.
	moves := map[string]int64{}
	for name, vip := range vips {
		if f.owner(vip) != f.owner(vip, without(f.nodes, pulled)...) {
			moves[name] = 1
		}
	}
	if moves["cable"] != 1 {
		t.Fatalf("test premise: cable (%s) does not move with %s's cable pulled", vips["cable"], pulled)
	}
	var statusBefore, metricBefore map[string]int64
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "every VIPStatus names the VIP's owner", func() (err error) {
		statusBefore, metricBefore, err = f.leaderChanges(ctx, vips)
		return err
	})
	ws := f.watchVIPs(t, vips)
	probes := map[string]*lab.HTTPProbe{}
	for name, vip := range vips {
		p := lab.StartHTTPProbe(f.clientNS, "http://"+vip.String()+"/", 20*time.Millisecond, httpProbeTimeout)
		probes[name] = p
		t.Cleanup(p.Stop)
	}

	pullAt := time.Now()
	plug := inflict(t, func(ctx context.Context) error { return f.s.LinkDown(ctx, pulled) },
		func(ctx context.Context) error { return f.s.LinkUp(ctx, pulled) })
	f.expectOwners(t, vips, "with "+pulled+"'s cable pulled", without(f.nodes, pulled)...)
	plugAt := time.Now()
	plug()
	f.expectOwners(t, vips, "after "+pulled+"'s cable was plugged back", without(f.nodes, pulled)...)
	time.Sleep(time.Until(plugAt.Add(afterHeal)))
	end := time.Now()
	time.Sleep(time.Second) // the probes' requests under way at end finish

	f.expectOneAnswer(t, ws, pullAt, pullAt, end, pulled+"'s cable pulled and plugged back")
	for _, name := range slices.Sorted(maps.Keys(probes)) {
		expectNoHTTPFailure(t, probes[name], name, vips[name], plugAt, end, pulled+"'s cable was plugged back")
	}

	// Counters only grow: wait until every owner has settled and the counts match, and
	// give up at once on a count past the real moves (a partial read never overcounts).
	deadline := time.Now().Add(labWait)
	for {
		status, metric, err := f.leaderChanges(ctx, vips, without(f.nodes, pulled)...)
		var wrong []string
		over := false
		for _, name := range slices.Sorted(maps.Keys(vips)) {
			for _, c := range []struct {
				what          string
				before, after int64
			}{{"VIPStatus leaderChanges", statusBefore[name], status[name]}, {"herald_l2_leader_changes_total", metricBefore[name], metric[name]}} {
				if c.after-c.before != moves[name] {
					wrong = append(wrong, fmt.Sprintf("%s (%s): %s went from %d to %d, want +%d (real moves)",
						name, vips[name], c.what, c.before, c.after, moves[name]))
				}
				over = over || c.after-c.before > moves[name]
			}
		}
		if err == nil && len(wrong) == 0 {
			break
		}
		if over || time.Now().After(deadline) {
			if err != nil {
				wrong = append(wrong, fmt.Sprintf("(last read: %v)", err))
			}
			t.Fatalf("leader changes after %s's cable was pulled and plugged back:\n%s", pulled, strings.Join(wrong, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestLabPartitionSplit splits memberlist into two halves, in a lab of two workers
// and in one of four, and cuts a minority of two off a lab of five (the two still hear
// each other), each lab built for this test in turn.
func TestLabPartitionSplit(t *testing.T) {
	for _, tc := range []struct{ workers, minority int }{{2, 1}, {4, 2}, {5, 2}} {
		workers := tc.workers
		t.Run(fmt.Sprintf("%d workers, %d cut off", workers, tc.minority), func(t *testing.T) {
			built := time.Now()
			f := splitLab(t, workers)
			t.Logf("lab of %d workers built in %v", workers, time.Since(built).Round(time.Second))
			a, b := f.nodes[:workers-tc.minority], f.nodes[workers-tc.minority:]
			vips := maps.Clone(f.vips)
			// Each half owns a VIP before the split.
			for i, half := range [][]string{a, b} {
				owns := func(vip netip.Addr) bool { return slices.Contains(half, f.owner(vip)) }
				if !slices.ContainsFunc(slices.Collect(maps.Values(vips)), owns) {
					name := fmt.Sprintf("half%d", i+1)
					_, vips[name] = f.serviceFirstFor(t, name, half[0])
				}
			}
			f.expectOwners(t, vips, "before the split")
			owners := map[string]string{} // before the split
			for name, vip := range vips {
				owners[name] = f.owner(vip)
			}
			if 2*tc.minority == workers {
				// A VIP off its hash node, where no fail-back kept it: an election by the
				// hash alone during the split would move it back, two nodes answering it
				// while the sides' elections ran apart.
				// Excluding a[0] for a moment moves its VIPs, and they stay.
				const name = "offhash"
				_, vips[name] = f.serviceFirstFor(t, name, a[0])
				f.setNodeLabel(t, a[0], election.ExcludeLabel, ptrTo(""))
				for n, vip := range vips {
					owners[n] = f.owner(vip, without(f.nodes, a[0])...)
					f.expectOwner(t, vip, owners[n], n+" with "+a[0]+" excluded")
				}
				f.setNodeLabel(t, a[0], election.ExcludeLabel, nil)
				for n, vip := range vips {
					f.expectOwner(t, vip, owners[n], n+" once "+a[0]+" may announce again (no fail-back)")
				}
			}
			ws := f.watchVIPs(t, vips)

			start := time.Now()
			writes := f.recordWrites(t, start.Add(partitionFor))
			heal := inflict(t, func(ctx context.Context) error { return f.s.SplitMemberlist(ctx, a, b) },
				func(ctx context.Context) error { return f.s.HealMemberlist(ctx, f.nodes...) })
			time.Sleep(partitionFor)
			summaryUse := f.heartbeatSummaryUse(t)
			healAt := time.Now()
			heal()
			// The sides tell each other's liveness from the controller's heartbeat
			// summary, one Lease, not by watching each other's heartbeats (an even
			// split of N speakers cost N²/20 heartbeat events a second that way).
			// Out of Quorum (every speaker of an even split, the cut-off minority of an
			// uneven one), they read every record through the controller's records
			// digest, one ConfigMap, not by watching every record (N² events a round
			// of writes at an even split).
			for _, n := range f.nodes {
				if u := summaryUse[n]; u.used != 1 || u.watched != 0 {
					t.Errorf("%s %s into the split: heartbeat summary used %v, heartbeats watched %v; want 1 and 0", n, partitionFor, u.used, u.watched)
				}
				outOfQuorum := 2*tc.minority == workers || slices.Contains(b, n)
				if u := summaryUse[n]; outOfQuorum && u.digest != 1 {
					t.Errorf("%s %s into the split, out of Quorum: records digest read %v, want 1", n, partitionFor, u.digest)
				}
			}

			// A speaker writes its record at each change of its view and mode and once
			// per peer that starts asking whether it is alive: at most a few per peer
			// lost, not a steady pace (two a second each, 16 in the window, before).
			seen := writes()
			for _, n := range f.nodes {
				got := len(seen[n])
				t.Logf("FIGURE record writes of %s in the first %s of the split: %d", n, partitionFor, got)
				if limit := 2*workers + 2; got > limit {
					t.Errorf("%s wrote its record %d times in %s of the split; want at most %d (a write per change of its view or mode and per new asker)", n, got, partitionFor, limit)
				}
			}

			during := fmt.Sprintf("memberlist split between %v and %v", a, b)
			f.expectOneAnswer(t, ws, start, start, healAt, during)
			f.expectServed(t, ws, start, start.Add(partitionGrace), healAt, during)
			// An even split moves nothing: from the split itself to the heal, each VIP is
			// answered by the node that owned it before, and by no other.
			if 2*tc.minority == workers {
				for _, w := range ws {
					s := w.arp.Summary(start, healAt)
					if want := f.macs[owners[w.service]]; !slices.Equal(s.MACs, []string{want}) {
						t.Errorf("%s: %s (%s) was answered by %s, want only %s, its owner before the split",
							during, w.service, w.vip, f.describeMACs(s.MACs), owners[w.service])
					}
				}
			}
			// A majority took the minority's VIPs, and keeps them (no fail-back).
			if 2*tc.minority < workers {
				f.expectOwners(t, vips, "after the heal", a...)
				// The minority, back from silence, reads every record afresh once before
				// it announces: from the records digest it read while out of Quorum,
				// which holds them as of a write of its own made since (its heartbeats
				// go on), not by listing every record from the API server.
				for _, n := range b {
					was := summaryUse[n]
					now := was
					testkit.Eventually(t, labtest.Wait, labtest.Interval, n+", back from silence, reads every record afresh from the records digest", func() error {
						if now = f.heartbeatSummaryUse(t)[n]; now.afreshDigest > was.afreshDigest {
							return nil
						}
						return fmt.Errorf("read afresh %v times from the digest and %v from the API server since the heal; want one from the digest",
							now.afreshDigest-was.afreshDigest, now.afreshAPI-was.afreshAPI)
					})
					t.Logf("FIGURE %s back from silence: read every record afresh %v times from the digest, %v from the API server", n, now.afreshDigest-was.afreshDigest, now.afreshAPI-was.afreshAPI)
				}
				return
			}
			// An even split elects with the claims of when it began, so nothing moved
			// during it (above). Its heal may move a VIP once: memberlist reconnects
			// the nodes pair by pair, and a majority that forms without a node for a
			// moment deposes it. Each VIP ends with exactly one owner.
			for _, name := range slices.Sorted(maps.Keys(vips)) {
				vip, was := vips[name], owners[name]
				var macs []string
				for _, n := range f.nodes {
					macs = append(macs, f.macs[n])
				}
				f.watchUntil(t, vip, name+" after the heal", "exactly one, a worker's", func(got []string) bool {
					if len(got) == 1 && slices.Contains(macs, got[0]) {
						if got[0] != f.macs[was] {
							t.Logf("%s (%s) moved from %s at the heal (answered by %s)", name, vip, was, got[0])
						}
						return true
					}
					return false
				})
			}
		})
	}
}

// summaryUse is how a speaker tells its unheard peers' liveness and reads every
// record, from its metrics: the heartbeat summary used, heartbeats watched, the records
// digest read; and how many times it read every record afresh (back from silence)
// from the digest and from the API server.
type summaryUse struct{ used, watched, digest, afreshDigest, afreshAPI float64 }

// heartbeatSummaryUse scrapes every worker's speaker for its use of the heartbeat
// summary; a failed scrape or a missing metric reads as -1.
func (f *fullLab) heartbeatSummaryUse(t *testing.T) map[string]summaryUse {
	t.Helper()
	out := map[string]summaryUse{}
	for _, n := range f.nodes {
		u := summaryUse{-1, -1, -1, 0, 0} // a counter never incremented has no series
		text, err := f.s.Scrape(t.Context(), n)
		if err != nil {
			t.Errorf("scraping %s's speaker: %v", n, err)
		} else {
			if v, ok := sampleValue(text, "herald_speaker_heartbeat_summary_used"); ok {
				u.used = v
			}
			if v, ok := sampleValue(text, "herald_speaker_heartbeats_watched"); ok {
				u.watched = v
			}
			if v, ok := sampleValue(text, `herald_speaker_record_watches{scope="digest"}`); ok {
				u.digest = v
			}
			if v, ok := sampleValue(text, `herald_speaker_record_reads_total{source="digest"}`); ok {
				u.afreshDigest = v
			}
			if v, ok := sampleValue(text, `herald_speaker_record_reads_total{source="api"}`); ok {
				u.afreshAPI = v
			}
		}
		out[n] = u
	}
	return out
}

// splitLab builds a walkthrough lab of its own with the given workers, removed when the
// test ends.
func splitLab(t *testing.T, workers int) *fullLab {
	t.Helper()
	// From one unheard peer, the speakers read the heartbeat summary (8 by default,
	// which no split of a lab this small reaches), and out of Quorum the records digest
	// from one record (32 by default): the splits run on both.
	cfg := lab.Config{Workers: workers, SpeakerArgs: []string{"--heartbeat-summary-from=1", "--records-digest-from=1"}}
	return ownLab(t, splitPrefix, fmt.Sprintf("lab%d", workers), cfg, true)
}

// ownLab builds a lab of the test's own as cfg says, with prefix and a run directory
// named name, removed when the test ends: the walkthrough's cluster when walkthrough is
// set, else the lab with its pods only (upLab).
func ownLab(t testing.TB, prefix, name string, cfg lab.Config, walkthrough bool) *fullLab {
	t.Helper()
	cfg.Prefix, cfg.RunDir = prefix, filepath.Join(os.TempDir(), "herald-e2e", prefix+name)
	var f *fullLab
	t.Cleanup(func() {
		if f != nil {
			for log, lines := range f.s.Refusals() {
				t.Errorf("%s was refused by the API server (missing RBAC?):\n%s", filepath.Base(log), strings.Join(lines, "\n"))
			}
		}
		if t.Failed() {
			t.Logf("logs of the lab are in %s", cfg.RunDir)
		}
		if err := lab.Down(cfg.RunDir, prefix); err != nil {
			t.Errorf("removing the lab (%s): %v", prefix, err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var err error
	if f, err = upLab(ctx, cfg); err == nil && walkthrough {
		err = f.setUpWalkthrough(ctx)
	}
	if err != nil {
		t.Fatalf("a lab of %d workers (prefix %s, logs in %s): %v", cfg.Workers, prefix, cfg.RunDir, err)
	}
	return f
}

// expectOwners waits until each VIP is answered by the node its election picks among
// candidates (every worker when none are given), one MAC only.
func (f *fullLab) expectOwners(t *testing.T, vips map[string]netip.Addr, when string, candidates ...string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(vips)) {
		f.expectOwner(t, vips[name], f.owner(vips[name], candidates...), name+" "+when)
	}
}

// vipWatch is the client's ARP watch of one Service's VIP.
type vipWatch struct {
	service string
	vip     netip.Addr
	arp     *lab.ARPWatch
}

// watchVIPs asks from the client for each VIP every arpEvery until the test ends.
func (f *fullLab) watchVIPs(t *testing.T, vips map[string]netip.Addr) []vipWatch {
	t.Helper()
	var out []vipWatch
	for _, name := range slices.Sorted(maps.Keys(vips)) {
		out = append(out, vipWatch{name, vips[name], labtest.WatchARP(t, f.Net.Host(lab.ClientHost).Namespace(), vips[name], arpEvery)})
	}
	return out
}

// expectOneAnswer fails the test for every request sent from from until to that more
// than one MAC answered, and logs what the client saw of each VIP; times are given from
// fault.
func (f *fullLab) expectOneAnswer(t *testing.T, ws []vipWatch, fault, from, to time.Time, when string) {
	t.Helper()
	for _, w := range ws {
		s := w.arp.Summary(from, to)
		t.Logf("%s, %s to %s: %s (%s): %s", when, sinceFault(from, fault), sinceFault(to, fault), w.service, w.vip, f.describeSummary(s, fault))
		if s.Requests == 0 {
			t.Errorf("%s: no ARP request for %s (%s) went out from %s to %s", when, w.service, w.vip, sinceFault(from, fault), sinceFault(to, fault))
		}
		for i, r := range s.Doubled {
			if i == 5 {
				t.Errorf("%s: ... and %d more requests for %s answered by several MACs", when, len(s.Doubled)-5, w.service)
				break
			}
			t.Errorf("%s: the request for %s (%s) at %s was answered by %d MACs: %s",
				when, w.service, w.vip, sinceFault(r.At, fault), len(r.MACs), f.describeMACs(r.MACs))
		}
	}
}

// expectServed fails the test for every VIP whose requests sent from from until to
// went unanswered for longer than maxSilence.
func (f *fullLab) expectServed(t *testing.T, ws []vipWatch, fault, from, to time.Time, when string) {
	t.Helper()
	for _, w := range ws {
		s := w.arp.Summary(from, to)
		if s.Requests == 0 || s.Silence > maxSilence {
			t.Errorf("%s: %s (%s) went unanswered for %v (%d requests) from %s, longer than %v; %d of %d requests unanswered from %s to %s",
				when, w.service, w.vip, s.Silence.Round(time.Millisecond), s.SilentRequests, sinceFault(s.SilenceAt, fault), maxSilence,
				s.Unanswered, s.Requests, sinceFault(from, fault), sinceFault(to, fault))
		}
	}
}

func (f *fullLab) describeSummary(s lab.ARPSummary, fault time.Time) string {
	silence := "none"
	if s.SilentRequests > 0 {
		silence = fmt.Sprintf("%v from %s", s.Silence.Round(time.Millisecond), sinceFault(s.SilenceAt, fault))
	}
	return fmt.Sprintf("%d requests, %d answered by several MACs, %d unanswered, longest silence %s, MACs %s",
		s.Requests, len(s.Doubled), s.Unanswered, silence, f.describeMACs(s.MACs))
}

// sinceFault writes t as a time after the fault: "+2.345s".
func sinceFault(t, fault time.Time) string {
	return fmt.Sprintf("%+.3fs", t.Sub(fault).Seconds())
}

// leaderChanges reads each VIP's leader changes as its VIPStatus counts them and as the
// speakers' metrics do (herald_l2_leader_changes_total, each speaker counting its own
// takeovers, summed over the workers). A VIPStatus that does not name the election's
// owner yet is an error: the counts are read once things have settled.
func (f *fullLab) leaderChanges(ctx context.Context, vips map[string]netip.Addr, candidates ...string) (status, metric map[string]int64, err error) {
	status, metric = map[string]int64{}, map[string]int64{}
	var errs []error
	for name, vip := range vips {
		var v heraldv1.VIPStatus
		if err := f.c.Get(ctx, keyIn("default", heraldv1.VIPStatusName(vip)), &v); err != nil {
			errs = append(errs, fmt.Errorf("VIPStatus of %s: %w", name, err))
			continue
		}
		if want := f.owner(vip, candidates...); v.Status.Node != want {
			errs = append(errs, fmt.Errorf("VIPStatus of %s names %q, want %s", name, v.Status.Node, want))
		}
		status[name] = v.Status.LeaderChanges
	}
	for _, n := range f.nodes {
		text, err := f.s.Scrape(ctx, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for name, vip := range vips {
			v, _ := sampleValue(text, fmt.Sprintf(`herald_l2_leader_changes_total{ip=%q}`, vip.String()))
			metric[name] += int64(v)
		}
	}
	return status, metric, errors.Join(errs...)
}

// expectNoHTTPFailure fails the test for every request of probe to Service name's vip
// that started from from (when what happened) until to and failed, and when none was
// measured.
func expectNoHTTPFailure(t *testing.T, probe *lab.HTTPProbe, name string, vip netip.Addr, from, to time.Time, what string) {
	t.Helper()
	n, failed := probe.Between(from, to)
	t.Logf("HTTP to %s (%s) from when %s: %d requests, %d failed", name, vip, what, n, len(failed))
	if n == 0 {
		t.Errorf("HTTP to %s: no request measured after %s", name, what)
	}
	for i, fl := range failed {
		if i == 5 {
			t.Errorf("HTTP to %s: ... and %d more failed", name, len(failed)-5)
			break
		}
		t.Errorf("HTTP to %s (%s) failed after %s: request at %s: %v", name, vip, what, sinceFault(fl.Start, from), fl.Err)
	}
}
