package speaker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/records"
)

// recheckDegraded is how soon a speaker that is not in ModeQuorum decides again even
// without news: Hold ends with time, and a failed read is retried.
const recheckDegraded = 250 * time.Millisecond

// decide runs the quorum rule on this speaker's situation, reading the records afresh
// when the rule asks for it, and returns the records it decided on too.
func (s *Speaker) decide(ctx context.Context, live []string) (quorum.Verdict, []quorum.Record) {
	in := quorum.Input{Self: s.cfg.NodeName, Now: time.Now(), LinkDown: s.linkDown(), Lost: s.liveness.lostAt,
		Restored: s.book.Restoring() && !s.servedOnce}
	for _, m := range live {
		in.Members = append(in.Members, quorum.Member{Name: m, Since: s.liveness.since[m]})
	}
	in.APIUp, in.APIAt, in.RecordsReadAt = s.records.Status()
	recs, err := s.records.List(ctx, live)
	if err != nil {
		s.log.Error(err, "reading the speakers' records from the cache")
	}
	in.Records = s.records.Live(recs, live, in.Now)
	v, st := quorum.Decide(s.cfg.Quorum, s.decision.state, in)
	if v.NeedRecords {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		recs, err := s.records.ListAfresh(rctx, st.SilentSince, live)
		cancel()
		if err != nil {
			s.log.V(1).Info("reading the speakers' records before announcing again", "error", err.Error())
		} else {
			in.Records = s.records.Live(recs, live, in.Now)
			in.APIUp, in.APIAt, in.RecordsReadAt = s.records.Status()
			v, st = quorum.Decide(s.cfg.Quorum, s.decision.state, in)
		}
	}
	s.decision.state = st
	s.records.Decided(v.Mode, len(v.Expected), len(v.Unreachable))
	if at := v.DecideAgainAt; !at.IsZero() && !at.Equal(s.decision.againAt) {
		s.decision.againAt = at // one timer per deadline
		time.AfterFunc(time.Until(at), s.pokeElection)
	}
	return v, in.Records
}

// publishRecord asks for this speaker's record to say what it hears and does. Called
// once the election's releases are applied: a peer waiting for this node to hear it
// (or to go silent) takes IPs as soon as it reads the record, so the record must not
// run ahead of what the announcer does.
func (s *Speaker) publishRecord(v quorum.Verdict, live []string, recs []quorum.Record) {
	macs := responderMACs(s.l2.Responders())
	s.records.Want(records.Wish{Members: live, Unreachable: v.Unreachable, MACs: macs, Mode: v.Mode,
		Misses: s.records.Misses(v.Expected, live),
		Askers: quorum.AskedBy(s.cfg.NodeName, recs, time.Now())})
	// The peers that hear this speaker learn its MACs from memberlist; too many for
	// memberlist's metadata, they learn them from the record alone.
	if s.members != nil && !s.members.SetMeta([]byte(strings.Join(macs, ","))) {
		s.log.V(1).Info("too many MACs for memberlist's metadata; peers read them from the record", "macs", len(macs))
	}
}

// observe makes the verdict visible: the metrics, a log line and an Event on this
// speaker's Node when the mode changes.
func (s *Speaker) observe(v quorum.Verdict, live []string) {
	for _, m := range allModes {
		val := 0.0
		if m == v.Mode {
			val = 1
		}
		s.metrics.mode.WithLabelValues(string(m)).Set(val)
	}
	s.metrics.expected.Set(float64(len(v.Expected)))
	s.records.Observe(len(v.Unreachable))
	s.metrics.unreachable.DeletePartialMatch(prometheus.Labels{"node": s.cfg.NodeName})
	for _, p := range v.Unreachable {
		s.metrics.unreachable.WithLabelValues(s.cfg.NodeName, p).Set(1)
	}

	prev := s.decision.verdict
	s.decision.verdict = v
	if prev.Mode == v.Mode && slices.Equal(prev.Unreachable, v.Unreachable) {
		return
	}
	s.log.Info("memberlist quorum", "mode", v.Mode, "hears", live, "unreachable", v.Unreachable, "reason", v.Reason)
	switch {
	case len(v.Unreachable) > 0 && v.Mode != quorum.ModeQuorum && v.Mode != quorum.ModeRejoining && v.Mode != quorum.ModeRestarting:
		s.nodeEvent(corev1.EventTypeWarning, heraldv1.ReasonMemberlistPartitioned, partitionNote(s.cfg.NodeName, s.cfg.Members.BindPort, v))
	case len(v.Unreachable) > 0 && v.Mode == quorum.ModeQuorum && len(prev.Unreachable) == 0:
		s.nodeEvent(corev1.EventTypeWarning, heraldv1.ReasonMemberlistPartitioned, partitionNote(s.cfg.NodeName, s.cfg.Members.BindPort, v))
	case v.Mode == quorum.ModeQuorum && len(v.Unreachable) == 0 && prev.Mode != "" && (prev.Mode != quorum.ModeQuorum || len(prev.Unreachable) > 0):
		s.nodeEvent(corev1.EventTypeNormal, heraldv1.ReasonMemberlistHealed, fmt.Sprintf("speaker on %s hears all %d speakers again", s.cfg.NodeName, len(v.Expected)))
	}
}

var allModes = []quorum.Mode{quorum.ModeQuorum, quorum.ModeHold, quorum.ModeArbitrated, quorum.ModeMinority, quorum.ModeIsolated, quorum.ModeRejoining, quorum.ModeRestarting}

// partitionNote says, for the Event, whom this speaker cannot reach, on which port,
// and what it does about it.
func partitionNote(self string, port int, v quorum.Verdict) string {
	what := map[quorum.Mode]string{
		quorum.ModeQuorum:     "it hears a majority and goes on electing owners with it",
		quorum.ModeHold:       "it keeps the IPs it announces and takes no other",
		quorum.ModeArbitrated: "owners are elected among the speakers alive in the API server",
		quorum.ModeMinority:   "it announces no IP; the majority serves them",
		quorum.ModeIsolated:   "it announces no IP",
	}[v.Mode]
	note := fmt.Sprintf("speaker on %s cannot reach the memberlist of %s (port %d, TCP and UDP): %s", self, strings.Join(v.Unreachable, ", "), port, what)
	if v.Reason != "" {
		note += " (" + v.Reason + ")"
	}
	return note
}

// nodeEvent writes an Event on this speaker's Node.
func (s *Speaker) nodeEvent(typ, reason, note string) {
	var node corev1.Node
	if err := s.cache.Get(context.Background(), types.NamespacedName{Name: s.cfg.NodeName}, &node); err != nil {
		s.log.V(1).Info("no Node to write an Event on", "node", s.cfg.NodeName, "error", err.Error())
		return
	}
	s.recorder.Eventf(&node, nil, typ, reason, "Announce", "%s", note)
}
