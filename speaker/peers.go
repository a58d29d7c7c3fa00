package speaker

import (
	"net"
	"slices"
	"sync"
	"time"

	"herald.dev/herald/speaker/records"
)

// peerMACRetention is how long the MACs of a speaker whose record is gone still count
// as a speaker's. A speaker stopping gracefully deletes its record while it still
// answers (until it has left memberlist), and its last frames may arrive after the
// deletion: without this, the peer taking over would take them for a foreign device
// and yield the IP to a node that is going away.
const peerMACRetention = 10 * time.Minute

// peerMACs are the MACs other speakers publish, in their records and in their
// memberlist metadata: a speaker that hears a peer has them from memberlist, one that
// does not from the peer's record (it does not watch every record, speaker/records).
type peerMACs struct {
	mu     sync.RWMutex
	byNode map[string][]string // node → its MACs, as strings
	byMeta map[string][]string // node → the MACs its memberlist metadata last said
	gone   map[string]goneMACs // node → the MACs of its deleted record
	now    func() time.Time    // time.Now unless a test says otherwise
}

// goneMACs are the MACs of a deleted record and when they stop counting.
type goneMACs struct {
	macs  []string
	until time.Time
}

func (p *peerMACs) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

func (p *peerMACs) set(node string, macs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byNode == nil {
		p.byNode, p.gone = map[string][]string{}, map[string]goneMACs{}
	}
	now := p.clock()
	for n, g := range p.gone {
		if !now.Before(g.until) {
			delete(p.gone, n)
		}
	}
	if len(macs) == 0 {
		if old, ok := p.byNode[node]; ok {
			p.gone[node] = goneMACs{macs: old, until: now.Add(peerMACRetention)}
		}
		delete(p.byNode, node)
		return
	}
	delete(p.gone, node)
	p.byNode[node] = macs
}

// setMeta notes the MACs node's memberlist metadata says (comma-separated). They stay
// until it says others: a speaker that died answered with them last.
func (p *peerMACs) setMeta(node string, meta []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byMeta == nil {
		p.byMeta = map[string][]string{}
	}
	p.byMeta[node] = records.SplitList(string(meta))
}

// otherHas says whether a node other than self has mac among its MACs in byNode.
func otherHas(byNode map[string][]string, self, mac string) bool {
	for node, macs := range byNode {
		if node != self && slices.Contains(macs, mac) {
			return true
		}
	}
	return false
}

// has says whether mac is a speaker's other than self: layer2.Config.Peer.
func (p *peerMACs) has(self string, mac net.HardwareAddr) bool {
	s := mac.String()
	now := p.clock()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if otherHas(p.byNode, self, s) || otherHas(p.byMeta, self, s) {
		return true
	}
	for node, g := range p.gone {
		if node != self && now.Before(g.until) && slices.Contains(g.macs, s) {
			return true
		}
	}
	return false
}
