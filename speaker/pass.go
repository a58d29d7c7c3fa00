package speaker

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"time"

	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/vipstatus"
	"herald.dev/herald/speaker/withhold"
)

// runElection runs one election over the whole cached state and applies its plan.
// Everything is re-read, so a pass cannot miss what a change affects; the Elector
// then re-elects only the IPs the change can move (a death: those the node owned or
// stood next in line for), so a membership change stays in the milliseconds at
// 1,000 nodes and 10,000 IPs, where a full election takes over a second.
//
// The quorum rule (speaker/quorum) first says whom to elect among: the members
// memberlist reports while this speaker hears a majority, the speakers alive in the
// API server when no side has one, or nobody (this speaker is cut off and announces
// nothing). A speaker that is silent or holds publishes nothing and counts no leader
// change: its view is not the cluster's.
func (s *Speaker) runElection(ctx context.Context) {
	// One view of the membership for the whole pass (members.Snapshot). Read piece
	// by piece, a member lost in between (one side of a split going, node by node)
	// was live for the election but had no claims any more, so it claimed nothing:
	// its IPs went to the next node by the hash, which took them from a member still
	// live in its view, at once, without waiting for it to stop answering. Two nodes
	// answered them for the rest of the split.
	membership := s.members.Snapshot()
	live, kept := membership.Live, membership.Kept
	returned := s.liveness.note(live, s.log)
	verdict, records := s.decide(ctx, live)
	s.observe(verdict, live)
	if verdict.Mode.Silent() {
		s.withhold.Update(ctx, withhold.Pass{Verdict: verdict, Live: live, Lost: s.liveness.lostAt, Records: records})
		s.apply(s.tracker.Silence(), nil, nil, false)
		// None: a node back from silence must not look like an incumbent, so a speaker
		// its peers cannot hear (cut off, cable out) drops its claims. Not one that
		// still hears every expected speaker (deposed for a moment while memberlist
		// settles, say): its peers keep it as the incumbent of its IPs, nobody takes
		// them, and it announces them again a moment later. A speaker that has just
		// replaced another on its node keeps the claims it took over until it may
		// announce them.
		if s.servedOnce && len(verdict.Unreachable) > 0 {
			s.publishClaims()
		}
		s.vips.Elected(ctx, vipstatus.Election{Now: time.Now()}) // publishes nothing, takes nothing back
		s.publishRecord(verdict, live, records)
		return
	}
	defer s.publishRecord(verdict, live, records)
	in, err := s.inputs(ctx)
	if err != nil {
		s.log.Error(err, "reading the cache for an election")
		return
	}
	s.servedOnce = true
	in.Members = verdict.Electors
	take := verdict.Take
	// The speakers that hear a majority, and those holding what they have, keep every
	// IP with the node announcing it (no fail-back), and keep the IPs of a peer that is
	// restarting for it. An arbitrated election keeps them too, with the claims every side
	// knew when the split began (claims.Book.Arbitrated), so that it moves nothing.
	s.book.StartPass(claims.Tokens(in.Services), s.knownSpeakers(live, records))
	now := time.Now()
	var restarting map[string]claims.Set
	if verdict.Mode == quorum.ModeArbitrated {
		in.Claims = s.book.Arbitrated(membership, verdict.Electors, s.liveness.since, now)
	}
	if verdict.Mode == quorum.ModeQuorum || verdict.Mode == quorum.ModeHold {
		var waiting bool
		in.Claims, waiting = s.book.Of(membership, s.liveness.since, now)
		// A peer that just joined and whose claims have not arrived yet may announce
		// IPs this speaker would otherwise take.
		take = take && !waiting
		restarting = s.restartingPeers(kept, now)
		for n, c := range restarting {
			in.Members = append(in.Members, n)
			in.Claims[n] = c
		}
	}
	// A takeover claims one more than the highest Gen of the claims known now: its
	// peers', live and lost, and its own.
	s.book.NoteGens(in.Claims, s.book.Lost(membership.Lost))
	// Before the election's announcements: endpoints of a dead node are out of every
	// Service as soon as the node's IPs move.
	s.withhold.Update(ctx, withhold.Pass{Verdict: verdict, Live: live, Lost: s.liveness.lostAt, Records: records,
		Nodes: in.Nodes, Restarting: slices.Collect(maps.Keys(restarting))})
	view, services, problems := BuildView(in)
	for _, p := range problems {
		s.log.Info("left out of the election", "object", p.Object, "error", p.Err.Error())
	}
	s.metrics.problems.Set(float64(len(problems)))
	decisions := spareRestarting(view, services, s.elector.Elect(view, services), restarting)
	s.metrics.elections.Inc()
	plan := s.tracker.Apply(decisions, take)
	s.beginHandovers(ctx, plan, in.Nodes)
	trusted := verdict.Mode == quorum.ModeQuorum || verdict.Mode == quorum.ModeArbitrated
	if trusted {
		// Before apply: a takeover's first frames may go out before apply returns.
		s.vips.Elected(ctx, vipstatus.Election{
			Decisions: decisions, Services: in.Services, PoolOf: in.PoolOf, LBClass: s.cfg.LBClass,
			Reporter: election.IsReporter(in.Members, s.cfg.NodeName), Taken: takenIPs(plan), Healed: returned, Now: time.Now(),
			Conflicts: s.conflicts(s.tracker.OwnedIPs()), Handovers: s.handoverNotes(),
		})
	}
	s.apply(plan, decisions, in.Members, trusted)
	if take {
		s.book.SettleRestored()
	}
	s.endHandovers(ctx, func(n string) bool { _, ok := restarting[n]; return ok })
	s.publishClaims()
	if returned {
		// A partition healed: peers that took our IPs over meanwhile made LAN hosts
		// point at them. Announce what we still own so hosts come back at once.
		for _, ip := range s.tracker.OwnedIPs() {
			s.l2.Reannounce(ip)
		}
	}
}

func takenIPs(p Plan) []netip.Addr {
	out := make([]netip.Addr, len(p.Take))
	for i, t := range p.Take {
		out[i] = t.IP
	}
	return out
}
