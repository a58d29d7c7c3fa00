package members

import (
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// This member's state goes to each peer over TCP (memberlist's SendReliable) in the
// background: memberlist calls the delegates with its locks held, and a slow or
// unreachable peer must hold up neither memberlist nor the sends to other peers.
//
// Sends to one peer coalesce. A member that joins exchanges states with every member
// at once, a member that comes and goes makes every peer send to it again, and a
// member publishes on every change of what it announces: one goroutine and one
// connection per request made a member coming back to a busy cluster the target of
// thousands of connections at once. Now at most one send is on its way to a peer, and
// the requests made meanwhile become one more send after it. The message is built
// when it goes, so it carries the newest state, and asks for the peer's state only if
// this member does not hold it by then (the peer's own message may have arrived
// meanwhile): a join costs about one message each way instead of two. A peer that is
// no longer live when its turn comes gets nothing (it gets the state when it comes
// back).

// outgoing is the send due to one peer; it exists while a goroutine owns the peer's
// sends (sendLoop).
type outgoing struct {
	node memberlist.Node // the peer as last seen (its address may change)
	due  bool            // one more send is due
	ask  bool            // the send due should ask for the peer's state
}

// Outcomes of herald_memberlist_state_sends_total.
const (
	sendSent    = "sent"
	sendFailed  = "failed"
	sendSkipped = "skipped"
)

func newSendsCounter() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_memberlist_state_sends_total",
		Help: "Messages carrying this speaker's state to a peer, by result: sent, failed (the peer could not be reached), skipped (the peer was no longer live when its turn came).",
	}, []string{"result"})
	for _, r := range []string{sendSent, sendFailed, sendSkipped} {
		c.WithLabelValues(r)
	}
	return c
}

// send makes one more send of this member's state to n due, asking for n's state
// when ask is set.
func (m *Members) send(n *memberlist.Node, ask bool) {
	ml := m.sender.Load()
	if ml == nil {
		return // not started yet: the peer gets the state in a push/pull
	}
	m.outMu.Lock()
	o, running := m.out[n.Name]
	if !running {
		o = &outgoing{}
		m.out[n.Name] = o
	}
	o.node, o.due, o.ask = *n, true, o.ask || ask
	m.outMu.Unlock()
	if !running {
		go m.sendLoop(ml, n.Name, o)
	}
}

// sendLoop sends to peer until no send is due.
func (m *Members) sendLoop(ml *memberlist.Memberlist, peer string, o *outgoing) {
	for {
		m.outMu.Lock()
		if !o.due {
			delete(m.out, peer)
			m.outMu.Unlock()
			return
		}
		node, ask := o.node, o.ask
		o.due, o.ask = false, false
		m.outMu.Unlock()

		msg, live := m.stateFor(peer, ask)
		if !live {
			m.sends.WithLabelValues(sendSkipped).Inc()
			continue
		}
		if err := ml.SendReliable(&node, msg); err != nil {
			m.sends.WithLabelValues(sendFailed).Inc()
			m.log.V(1).Info("sending this speaker's state", "peer", peer, "error", err.Error())
			continue
		}
		m.sends.WithLabelValues(sendSent).Inc()
	}
}

// stateFor is the state message for peer, asking for the peer's state when ask is
// set and this member does not hold it; false when peer is no longer live.
func (m *Members) stateFor(peer string, ask bool) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.live[peer] {
		return nil, false
	}
	_, held := m.states[peer]
	return m.stateMessage(ask && !held), true
}
