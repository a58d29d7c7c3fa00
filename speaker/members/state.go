package members

import (
	"bytes"
	"slices"
	"strconv"
	"time"
)

// Every member publishes a small state of its own (the speaker: the IPs it
// announces) and keeps the latest state of every live peer. A state travels
//   - to every live peer over TCP when its owner publishes a new one (outbox.go: the
//     sends to one peer coalesce);
//   - to a peer that joins (as seen by either side): the member that sees a peer
//     join sends its state and asks for the peer's in return, so a member that
//     returns after peers declared it dead learns their states, and they learn its;
//   - in memberlist's push/pull exchanges (on join and every PushPullInterval), which
//     heal a lost message.
//
// A peer's state is forgotten when memberlist declares it dead or left: a member that
// comes back starts from the state it sends then. The last state of a peer lost
// without a goodbye stays readable apart (Snapshot's Lost) until it comes back: both sides
// of a split still know what the other side announced when it began. Versions order one member's states
// (a restarted member starts above its previous versions: they are clock based).

// statePrefix starts a state message; stateAsk marks one whose receiver should answer
// with its own state.
const (
	statePrefix = "herald-state:"
	stateAsk    = "?"
)

// peerState is one member's latest state.
type peerState struct {
	version uint64
	data    []byte
}

// Publish makes data this member's state and sends it to every live peer, without
// waiting for them (outbox.go).
func (m *Members) Publish(data []byte) {
	m.mu.Lock()
	v := max(uint64(time.Now().UnixNano()), m.own.version+1)
	m.own = peerState{version: v, data: slices.Clone(data)}
	m.mu.Unlock()
	for _, n := range m.ml.Members() {
		if n.Name != m.name {
			m.send(n, false)
		}
	}
}

// statesLocked is Snapshot's States.
func (m *Members) statesLocked() map[string][]byte {
	out := make(map[string][]byte, len(m.states))
	for n, s := range m.states {
		if m.live[n] {
			out[n] = s.data
		}
	}
	return out
}

// lostLocked is Snapshot's Lost.
func (m *Members) lostLocked() map[string][]byte {
	out := make(map[string][]byte, len(m.lost))
	for n, d := range m.lost {
		out[n] = d
	}
	return out
}

// stateMessage encodes this member's state; called with m.mu held.
func (m *Members) stateMessage(ask bool) []byte {
	var b bytes.Buffer
	b.WriteString(statePrefix)
	if ask {
		b.WriteString(stateAsk)
	}
	b.WriteString(m.name)
	b.WriteByte('\n')
	b.WriteString(strconv.FormatUint(m.own.version, 10))
	b.WriteByte('\n')
	b.Write(m.own.data)
	return b.Bytes()
}

// receiveState stores a state message (without its prefix) and says whether it was
// news, and whether its sender asks for this member's state.
func (m *Members) receiveState(b []byte) (from string, ask bool, ok bool) {
	b, ask = bytes.CutPrefix(b, []byte(stateAsk))
	name, rest, found := bytes.Cut(b, []byte{'\n'})
	if !found || len(name) == 0 {
		return "", false, false
	}
	ver, data, found := bytes.Cut(rest, []byte{'\n'})
	if !found {
		return "", false, false
	}
	v, err := strconv.ParseUint(string(ver), 10, 64)
	if err != nil {
		return "", false, false
	}
	from = string(name)
	m.mu.Lock()
	old, had := m.states[from]
	news := from != m.name && (!had || v > old.version)
	if news {
		m.states[from] = peerState{version: v, data: slices.Clone(data)}
	}
	m.mu.Unlock()
	if news {
		m.notify()
	}
	return from, ask, true
}

// LocalState is this member's state for memberlist's push/pull.
func (d *messageDelegate) LocalState(bool) []byte {
	m := (*Members)(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stateMessage(false)
}

// MergeRemoteState takes the peer's state from a push/pull.
func (d *messageDelegate) MergeRemoteState(buf []byte, _ bool) {
	if rest, ok := bytes.CutPrefix(buf, []byte(statePrefix)); ok {
		(*Members)(d).receiveState(rest)
	}
}

// stateMsg stores a peer's state and answers a peer that asks for this member's.
func (d *messageDelegate) stateMsg(b []byte) {
	m := (*Members)(d)
	from, ask, ok := m.receiveState(b)
	ml := m.sender.Load()
	if !ok || !ask || ml == nil {
		return
	}
	for _, n := range ml.Members() {
		if n.Name == from {
			m.send(n, false)
			return
		}
	}
}

// KeptState is the last state of a member that left saying it restarts, and since
// when it is gone.
type KeptState struct {
	Data  []byte
	Since time.Time
}

// Snapshot is the membership at one instant, as an election pass reads it.
type Snapshot struct {
	// Live is Live.
	Live []string
	// Kept are the states kept for the members that left saying they restart and
	// have not come back (nor died again: a member that comes back and dies without a
	// word is no longer kept). The caller decides how long it is kept; Release ends
	// one.
	Kept map[string]KeptState
	// States is the latest state of every live peer whose state this member has;
	// live peers missing from it are those whose state has not arrived yet.
	States map[string][]byte
	// Lost is the last state of every peer memberlist lost without a goodbye (dead,
	// or cut off from this member) and that has not come back.
	Lost map[string][]byte
}

// Snapshot returns the membership at one instant. Read apart, the parts disagree
// when a member comes or goes in between: a restarting member moving from kept to
// live could be missed in both, and a member lost in between would be live yet
// have no state, which reads as claiming nothing.
func (m *Members) Snapshot() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Snapshot{Live: m.liveLocked(), Kept: m.keptLocked(), States: m.statesLocked(), Lost: m.lostLocked()}
}

func (m *Members) keptLocked() map[string]KeptState {
	out := make(map[string]KeptState, len(m.kept))
	for n, h := range m.kept {
		out[n] = h
	}
	return out
}

// Release forgets the state kept for name.
func (m *Members) Release(name string) {
	m.mu.Lock()
	delete(m.kept, name)
	m.mu.Unlock()
}
