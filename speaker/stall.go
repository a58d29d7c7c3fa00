package speaker

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// After a stall (the speaker did not run for longer than --stall-after: a paused VM or
// container, a frozen or starved process), its peers may have declared it dead and
// taken its IPs over while it still believes it owns them. Layer 2 answers for no IP
// from the moment the stall is noticed (layer2's watchdog); the speaker then exchanges
// state with every peer at once (members.Sync), so that it learns it was declared dead
// (and refutes it) and receives the claims of the nodes that stood in for it, runs an
// election with them, which leaves each IP with the node that took it over (no
// fail-back), and only then lets layer 2 answer again (Resume).

// stallSyncTimeout bounds the exchange with the peers after a stall; peers that have
// not answered by then are heard through gossip, as usual.
const stallSyncTimeout = 2 * time.Second

// onStall is layer 2's report of a stall; it hands it to the loop.
func (s *Speaker) onStall(gap time.Duration) {
	select {
	case s.stalls.reports <- gap:
	default: // one is pending; the loop syncs once for both
	}
}

// stalled starts a sync with the peers, or asks for another one after the running one
// (loop goroutine only).
func (s *Speaker) stalled(ctx context.Context, gap time.Duration) {
	s.stalls.longest = max(s.stalls.longest, gap)
	if s.stalls.syncing {
		s.stalls.again = true
		return
	}
	s.stalls.syncing = true
	var nodes corev1.NodeList
	if err := s.cache.List(ctx, &nodes); err != nil {
		s.log.Error(err, "listing Nodes to find the peers to sync with after a stall")
	}
	addrs := peerAddrs(nodes.Items, s.cfg.NodeName, s.cfg.Members.BindAddr, s.cfg.Members.BindPort)
	go func() {
		reached := s.members.Sync(addrs, stallSyncTimeout)
		select {
		case s.stalls.synced <- reached:
		case <-ctx.Done():
		}
	}()
}

// resumeAfterStall, once the sync with the peers is done, runs the election their
// fresh states call for, then lets layer 2 answer again and reports the stall (loop
// goroutine only).
func (s *Speaker) resumeAfterStall(ctx context.Context, reached int) {
	s.stalls.syncing = false
	if s.stalls.again {
		s.stalls.again = false
		s.stalled(ctx, 0)
		return
	}
	s.runElection(ctx)
	s.l2.Resume()
	gap := s.stalls.longest
	s.stalls.longest = 0
	s.log.Info("answering again after a stall", "stalled", gap, "peersReached", reached)
	s.nodeEvents.on(ctx, s.cfg.NodeName, corev1.EventTypeWarning, heraldv1.ReasonSpeakerStalled, "Resume", fmt.Sprintf(
		"the speaker of %s did not run for %s (a paused VM or container, a frozen or starved process): it answered for no IP until it had heard its peers again (%d answered)",
		s.cfg.NodeName, gap.Round(time.Millisecond), reached))
}
