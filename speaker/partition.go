package speaker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"herald.dev/herald/speaker/quorum"
)

// Event reasons the speaker writes on its own Node when memberlist splits and heals.
const (
	ReasonMemberlistPartitioned = "MemberlistPartitioned"
	ReasonMemberlistHealed      = "MemberlistHealed"
)

// recheckDegraded is how soon a speaker that is not in ModeQuorum decides again even
// without news: Hold ends with time, and a failed read is retried.
const recheckDegraded = 250 * time.Millisecond

// decide runs the quorum rule on this speaker's situation, reading the records afresh
// when the rule asks for it, and returns the records it decided on too.
func (s *Speaker) decide(ctx context.Context, live []string) (quorum.Verdict, []quorum.Record) {
	in := quorum.Input{Self: s.cfg.NodeName, Now: time.Now(), LinkDown: s.linkDown(), Lost: s.lostAt}
	for _, m := range live {
		in.Members = append(in.Members, quorum.Member{Name: m, Since: s.since[m]})
	}
	in.APIUp, in.APIAt, in.RecordsReadAt = s.records.status()
	recs, err := s.records.list(ctx, false, live)
	if err != nil {
		s.log.Error(err, "reading the speakers' records from the cache")
	}
	in.Records = s.records.live(recs, live, in.Now)
	v, st := quorum.Decide(s.cfg.Quorum, s.qstate, in)
	if v.NeedRecords {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		recs, err := s.records.listAfresh(rctx, st.SilentSince, live)
		cancel()
		if err != nil {
			s.log.V(1).Info("reading the speakers' records before announcing again", "error", err.Error())
		} else {
			in.Records = s.records.live(recs, live, in.Now)
			in.APIUp, in.APIAt, in.RecordsReadAt = s.records.status()
			v, st = quorum.Decide(s.cfg.Quorum, s.qstate, in)
		}
	}
	s.qstate = st
	s.records.prime()
	if s.records.view != nil {
		s.records.view.setMode(v.Mode, len(v.Expected), len(v.Unreachable))
	}
	if at := v.DecideAgainAt; !at.IsZero() && !at.Equal(s.decideAgainAt) {
		s.decideAgainAt = at // one timer per deadline
		time.AfterFunc(time.Until(at), s.pokeElection)
	}
	return v, in.Records
}

// linkDown says whether the interface holding memberlist's address has lost its
// carrier. It runs four times a second, so it reads one sysfs file; the interface is
// looked up among all only when unknown or gone, at most every bindLookupEvery. An
// address on no interface (a test binding to loopback, say) counts as up.
func (s *Speaker) linkDown() bool {
	if s.bindIface != "" {
		b, err := os.ReadFile(filepath.Join("/sys/class/net", s.bindIface, "carrier"))
		switch {
		case err == nil:
			return strings.TrimSpace(string(b)) != "1"
		case errors.Is(err, syscall.EINVAL):
			return true // the kernel refuses to read the carrier of an interface set down
		}
		s.bindIface = "" // renamed or gone: look it up again
	}
	if time.Since(s.bindLookup) < bindLookupEvery {
		return false
	}
	s.bindLookup = time.Now()
	s.bindIface = interfaceOf(s.cfg.Members.BindAddr)
	return false
}

const bindLookupEvery = 5 * time.Second

// interfaceOf returns the name of the interface holding addr, or "".
func interfaceOf(addr string) string {
	bind, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifi := range ifaces {
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == bind {
				return ifi.Name
			}
		}
	}
	return ""
}

// publishRecord asks for this speaker's record to say what it hears and does. Called
// once the election's releases are applied: a peer waiting for this node to hear it
// (or to go silent) takes IPs as soon as it reads the record, so the record must not
// run ahead of what the announcer does.
func (s *Speaker) publishRecord(v quorum.Verdict, live []string, recs []quorum.Record) {
	macs := responderMACs(s.l2.Responders())
	s.records.want(recordWish{members: live, unreachable: v.Unreachable, macs: macs, mode: v.Mode,
		misses: s.recordMisses(v, live),
		askers: quorum.AskedBy(s.cfg.NodeName, recs, time.Now())})
	// The peers that hear this speaker learn its MACs from memberlist; too many for
	// memberlist's metadata, they learn them from the record alone.
	if s.members != nil && !s.members.SetMeta([]byte(strings.Join(macs, ","))) {
		s.log.V(1).Info("too many MACs for memberlist's metadata; peers read them from the record", "macs", len(macs))
	}
}

// recordMisses returns the speakers this one's record labels as missed (missed): those
// it expects, has heard or whose record it has seen, that it does not hear, less those
// not expected whose Node is gone (forgotten then). A record goes with its Node (its
// owner), and a speaker in Quorum may never see that deletion: a record that listed it
// leaves none of its watches. Without the check, every Node replaced would stay in
// every record.
func (s *Speaker) recordMisses(v quorum.Verdict, live []string) []string {
	out := missed(s.cfg.NodeName, s.records.known(v.Expected, live), live)
	expected := make(map[string]bool, len(v.Expected))
	for _, n := range v.Expected {
		expected[n] = true
	}
	return slices.DeleteFunc(out, func(n string) bool {
		if expected[n] {
			return false
		}
		var node corev1.Node
		if err := s.cache.Get(context.Background(), types.NamespacedName{Name: n}, &node); apierrors.IsNotFound(err) {
			s.records.forgetNode(n)
			return true
		}
		return false
	})
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
	if s.records.beats != nil {
		s.metrics.heartbeats.Set(float64(len(s.records.beats.watched())))
		used := 0.0
		if len(v.Unreachable) > 0 && s.records.beats.summaryUsed() {
			used = 1
		}
		s.metrics.beatSummary.Set(used)
	}
	if w := s.records.view; w != nil {
		every, digest, narrow, byName := w.counts()
		s.metrics.recordWatches.WithLabelValues("every").Set(float64(every))
		s.metrics.recordWatches.WithLabelValues("digest").Set(float64(digest))
		s.metrics.recordWatches.WithLabelValues("by-name").Set(float64(byName))
		s.metrics.recordWatches.WithLabelValues("trouble").Set(float64(narrow))
		s.metrics.recordWatches.WithLabelValues("leaving-out").Set(float64(narrow))
	}
	s.metrics.unreachable.DeletePartialMatch(prometheus.Labels{"node": s.cfg.NodeName})
	for _, p := range v.Unreachable {
		s.metrics.unreachable.WithLabelValues(s.cfg.NodeName, p).Set(1)
	}

	prev := s.verdict
	s.verdict = v
	if prev.Mode == v.Mode && slices.Equal(prev.Unreachable, v.Unreachable) {
		return
	}
	s.log.Info("memberlist quorum", "mode", v.Mode, "hears", live, "unreachable", v.Unreachable, "reason", v.Reason)
	switch {
	case len(v.Unreachable) > 0 && v.Mode != quorum.ModeQuorum && v.Mode != quorum.ModeRejoining:
		s.nodeEvent(corev1.EventTypeWarning, ReasonMemberlistPartitioned, partitionNote(s.cfg.NodeName, s.cfg.Members.BindPort, v))
	case len(v.Unreachable) > 0 && v.Mode == quorum.ModeQuorum && len(prev.Unreachable) == 0:
		s.nodeEvent(corev1.EventTypeWarning, ReasonMemberlistPartitioned, partitionNote(s.cfg.NodeName, s.cfg.Members.BindPort, v))
	case v.Mode == quorum.ModeQuorum && len(v.Unreachable) == 0 && prev.Mode != "" && (prev.Mode != quorum.ModeQuorum || len(prev.Unreachable) > 0):
		s.nodeEvent(corev1.EventTypeNormal, ReasonMemberlistHealed, fmt.Sprintf("speaker on %s hears all %d speakers again", s.cfg.NodeName, len(v.Expected)))
	}
}

var allModes = []quorum.Mode{quorum.ModeQuorum, quorum.ModeHold, quorum.ModeArbitrated, quorum.ModeMinority, quorum.ModeIsolated, quorum.ModeRejoining}

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
