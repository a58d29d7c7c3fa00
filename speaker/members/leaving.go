package members

import (
	"bytes"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Peers must tell a member that left on purpose from one that died or was cut off:
// the first keeps answering for its IPs until its peers took over (make before break),
// while the IPs of the others are taken only once nobody answers for them. memberlist
// reports both as NotifyLeave, with the node's state not filled in, so a leaving
// member first tells every peer directly (reliable, TCP) and only then leaves. A
// peer may still hear the leave first: the word, arriving within lateGoodbye, turns
// the loss it reported into a goodbye.

// leavingPrefix starts the message a leaving member sends, followed by its name;
// restartingPrefix the message of one that leaves to come back soon (a restart), whose
// peers keep its state meanwhile (Kept).
const (
	leavingPrefix    = "herald-leaving:"
	restartingPrefix = "herald-restarting:"
)

// lateGoodbye is how long after memberlist reported a member gone its word that it
// leaves still counts. The word travels over TCP and memberlist's leave over UDP, so
// a peer may process them in either order, a few milliseconds apart; a member that
// died or was cut off says nothing, and memberlist takes longer than this to tell
// such a loss (its suspicion alone lasts 400 ms or more).
const lateGoodbye = time.Second

// sayLeaving tells every live peer that this member is leaving (restarting, when
// restart is set), waiting at most timeout for them all. A peer that does not hear it
// treats the departure as a death, which is the safe side.
func (m *Members) sayLeaving(timeout time.Duration, restart bool) {
	self := m.name
	msg := []byte(leavingPrefix + self)
	if restart {
		msg = []byte(restartingPrefix + self)
	}
	var wg sync.WaitGroup
	for _, n := range m.ml.Members() {
		if n.Name == self {
			continue
		}
		wg.Add(1)
		go func(n *memberlist.Node) {
			defer wg.Done()
			if err := m.ml.SendReliable(n, msg); err != nil {
				m.log.V(1).Info("telling a peer this speaker leaves", "peer", n.Name, "error", err.Error())
			}
		}(n)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// LeftGracefully says whether name, not live, left the cluster on purpose (a speaker
// stopping, which said so before leaving) rather than being declared dead (it died,
// or this member cannot reach it).
func (m *Members) LeftGracefully(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.live[name] && m.left[name]
}

// messageDelegate is memberlist's Delegate: it receives the leaving messages and the
// members' states (state.go).
type messageDelegate Members

func (d *messageDelegate) NotifyMsg(b []byte) {
	if rest, ok := bytes.CutPrefix(b, []byte(statePrefix)); ok {
		d.stateMsg(rest)
		return
	}
	restart := false
	name, ok := strings.CutPrefix(string(b), leavingPrefix)
	if !ok {
		name, ok = strings.CutPrefix(string(b), restartingPrefix)
		restart = ok
	}
	if !ok || name == "" {
		return
	}
	m := (*Members)(d)
	m.mu.Lock()
	if at, lost := m.lostAt[name]; lost && !m.live[name] && time.Since(at) < lateGoodbye {
		// The word came after memberlist reported the departure: it was a goodbye.
		m.left[name] = true
		if restart {
			m.kept[name] = KeptState{Data: m.lost[name], Since: at}
		}
		delete(m.lost, name)
		delete(m.lostAt, name)
		m.mu.Unlock()
		m.notify()
		return
	}
	m.leaving[name] = true
	m.restarting[name] = restart
	m.mu.Unlock()
}

func (d *messageDelegate) GetBroadcasts(int, int) [][]byte { return nil }

var _ memberlist.Delegate = (*messageDelegate)(nil)
