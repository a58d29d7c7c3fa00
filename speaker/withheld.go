package speaker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/deadnodes"
	"herald.dev/herald/speaker/quorum"
)

// updateWithheld decides which nodes are dead (speaker/deadnodes), hands them to the
// proxier, points the host prober at the suspects, and reports changes. Called by the
// loop after every election, with the Nodes the election read (nil when silent: a
// silent speaker withholds nothing).
//
// The prober also watches the hosts of the peers restarting (their IPs kept for them):
// one that stops answering has its IPs moved.
func (s *Speaker) updateWithheld(ctx context.Context, v quorum.Verdict, live []string, recs []quorum.Record, nodes []*corev1.Node, restarting map[string]claims.Set) {
	in := deadnodes.Input{
		Self: s.cfg.NodeName, Quorum: v.Mode == quorum.ModeQuorum && nodes != nil, Live: live,
		Lost: s.lostAt, Left: map[string]bool{}, Records: map[string]deadnodes.Record{}, Now: time.Now(),
	}
	for n := range s.lostAt {
		if s.members.LeftGracefully(n) {
			in.Left[n] = true
		}
	}
	for _, r := range recs {
		in.Records[r.Node] = deadnodes.Record{RenewedAt: r.RenewedAt, Duration: r.Duration, ChangedAt: r.ChangedAt}
	}
	addrs := map[string]netip.Addr{}
	for _, n := range nodes {
		in.Nodes = append(in.Nodes, n.Name)
		if a, ok := probeAddr(n, s.cfg.Members.BindAddr); ok {
			addrs[n.Name] = a
		}
	}
	in.AliveAt, in.SilentAt = s.prober.answers()

	targets := map[string]netip.Addr{}
	for n := range restarting {
		if a, ok := addrs[n]; ok {
			targets[n] = a
		}
	}
	if !s.cfg.WithholdDeadEndpoints {
		s.prober.set(targets)
		return
	}
	for _, n := range deadnodes.Suspects(in) {
		if a, ok := addrs[n]; ok {
			targets[n] = a
		}
	}
	s.prober.set(targets)

	dead := deadnodes.Decide(deadnodes.DefaultConfig(), in)
	set := make(map[string]bool, len(dead))
	for _, d := range dead {
		set[d.Name] = d.Unreachable
	}
	s.proxier.SetWithheld(set)
	s.reportWithheld(ctx, dead, live)
	s.withheld = dead
}

// reportWithheld logs each change of the withheld nodes and, on the one speaker that
// reports for the cluster (the live member with the smallest name, the node itself
// left out: back, it knows nothing of its withholding), writes an Event on the Node.
func (s *Speaker) reportWithheld(ctx context.Context, dead []deadnodes.Node, live []string) {
	reports := func(node string) bool {
		return isReporter(slices.DeleteFunc(slices.Clone(live), func(n string) bool { return n == node }), s.cfg.NodeName)
	}
	before := map[string]deadnodes.Node{}
	for _, d := range s.withheld {
		before[d.Name] = d
	}
	for _, d := range dead {
		old, was := before[d.Name]
		delete(before, d.Name)
		switch {
		case !was:
			action, why := "WithholdVanished", fmt.Sprintf("the speakers lost %s without a goodbye and nothing shows it alive", d.Name)
			if d.Left {
				action, why = "WithholdShutDown", fmt.Sprintf("the speaker of %s said goodbye, then its host stopped answering (a node shutting down)", d.Name)
			}
			s.log.Info("withholding the endpoints of a node the speakers know down", "node", d.Name, "since", d.Since, "why", why)
			if reports(d.Name) {
				s.eventOn(ctx, d.Name, corev1.EventTypeWarning, heraldv1.ReasonEndpointsWithheld, action, why+": its endpoints get no new connections from any node's proxier")
			}
		case d.Unreachable && !old.Unreachable:
			s.log.Info("a withheld node answers nothing: clearing the flows to its endpoints", "node", d.Name)
		}
	}
	restored := make([]string, 0, len(before))
	for n := range before {
		restored = append(restored, n)
	}
	slices.Sort(restored)
	for _, n := range restored {
		s.log.Info("the endpoints of a node are no longer withheld", "node", n)
		if reports(n) {
			s.eventOn(ctx, n, corev1.EventTypeNormal, heraldv1.ReasonEndpointsRestored, "Restore", fmt.Sprintf(
				"%s is back (or shown alive): its endpoints get traffic again", n))
		}
	}
}

// eventOn writes an Event on the Node named node (nodeEvents: each a new one).
func (s *Speaker) eventOn(ctx context.Context, node, typ, reason, action, note string) {
	var n corev1.Node
	if err := s.cache.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
		s.log.V(1).Info("no Node to write an Event on", "node", node, "error", err.Error())
		return
	}
	s.nodeEvents.send(ctx, &n, typ, reason, action, note)
}

// probeAddr is the InternalIP of n to probe, of bindAddr's family when it has one.
func probeAddr(n *corev1.Node, bindAddr string) (netip.Addr, bool) {
	want4 := !strings.Contains(bindAddr, ":")
	var other netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() == want4 {
			return ip, true
		}
		if !other.IsValid() {
			other = ip
		}
	}
	return other, other.IsValid()
}
