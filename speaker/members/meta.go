package members

import (
	"bytes"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// Every member can attach a few bytes to its memberlist node (memberlist's node
// metadata, at most memberlist.MetaMaxSize): they travel with the member's alive
// messages, so every peer that hears it has them, with no API server in between. The
// speaker puts the MACs its responders answer with there: a peer must recognise them
// whether or not it watches the speaker's record.

// SetMeta makes data this member's metadata and gossips it, without waiting. Data
// longer than memberlist allows is refused: false.
func (m *Members) SetMeta(data []byte) bool {
	if len(data) > memberlist.MetaMaxSize {
		return false
	}
	m.mu.Lock()
	same := bytes.Equal(m.meta, data)
	m.meta = slices.Clone(data)
	m.mu.Unlock()
	if same {
		return true
	}
	if ml := m.sender.Load(); ml != nil {
		go func() { _ = ml.UpdateNode(5 * time.Second) }() // best effort: alive messages carry it later anyway
	}
	return true
}

// OnMeta calls fn with a peer's metadata whenever memberlist reports it joining or
// updated. fn runs under memberlist's lock: it must not block. Set it before Join.
func (m *Members) OnMeta(fn func(name string, data []byte)) {
	m.mu.Lock()
	m.onMeta = fn
	m.mu.Unlock()
}

// peerMeta passes n's metadata on.
func (m *Members) peerMeta(n *memberlist.Node) {
	m.mu.Lock()
	fn := m.onMeta
	m.mu.Unlock()
	if fn != nil && n.Name != m.name {
		fn(n.Name, slices.Clone(n.Meta))
	}
}

// NodeMeta is memberlist's call for this member's metadata.
func (d *messageDelegate) NodeMeta(limit int) []byte {
	m := (*Members)(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.meta) > limit {
		return nil
	}
	return slices.Clone(m.meta)
}
