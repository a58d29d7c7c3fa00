package members

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/memberlist"
)

// keyChange is how to turn one keyring into another without ever leaving memberlist
// unable to encrypt: install the new keys, then switch the primary, then drop the
// keys no longer wanted (never the primary in use: memberlist refuses that).
type keyChange struct {
	add    [][]byte
	use    []byte // nil: the primary stays
	remove [][]byte
}

func (c keyChange) empty() bool { return len(c.add) == 0 && c.use == nil && len(c.remove) == 0 }

// diffKeys is the change from the keyring have to want, both primary first.
func diffKeys(have, want [][]byte) keyChange {
	var c keyChange
	in := func(ks [][]byte, k []byte) bool {
		return slices.ContainsFunc(ks, func(x []byte) bool { return string(x) == string(k) })
	}
	for _, k := range want {
		if !in(have, k) {
			c.add = append(c.add, k)
		}
	}
	if len(want) > 0 && (len(have) == 0 || string(have[0]) != string(want[0])) {
		c.use = want[0]
	}
	for _, k := range have {
		if !in(want, k) {
			c.remove = append(c.remove, k)
		}
	}
	return c
}

// newKeyring is memberlist's keyring of cfg's keys, the primary SecretKey.
func newKeyring(cfg Config) (*memberlist.Keyring, error) {
	others := make([][]byte, len(cfg.OtherKeys))
	for i, k := range cfg.OtherKeys {
		others[i] = slices.Clone(k)
	}
	kr, err := memberlist.NewKeyring(others, slices.Clone(cfg.SecretKey))
	if err != nil {
		return nil, fmt.Errorf("memberlist keyring: %w", err)
	}
	return kr, nil
}

// Keys returns the keys this member holds, the primary (the one it encrypts with)
// first.
func (m *Members) Keys() [][]byte {
	primary := m.keyring.GetPrimaryKey()
	out := [][]byte{primary}
	for _, k := range m.keyring.GetKeys() {
		if string(k) != string(primary) {
			out = append(out, k)
		}
	}
	return out
}

// SetKeys makes keys (the primary first) this member's keyring while it runs: new
// keys are installed before the primary changes, and keys are dropped only after.
// Peers decrypt with any key they hold, so a key added everywhere before it becomes
// primary anywhere, and removed only once no member sends with it, never cuts a
// member off. It reports whether anything changed.
func (m *Members) SetKeys(keys [][]byte) (bool, error) {
	if len(keys) == 0 {
		return false, errors.New("memberlist keyring: no key")
	}
	for _, k := range keys {
		if err := memberlist.ValidateKey(k); err != nil {
			return false, fmt.Errorf("memberlist keyring: %w", err)
		}
	}
	m.keyMu.Lock()
	defer m.keyMu.Unlock()
	c := diffKeys(m.Keys(), keys)
	for _, k := range c.add {
		if err := m.keyring.AddKey(slices.Clone(k)); err != nil {
			return true, fmt.Errorf("adding a memberlist key: %w", err)
		}
	}
	if c.use != nil {
		if err := m.keyring.UseKey(c.use); err != nil {
			return true, fmt.Errorf("switching the primary memberlist key: %w", err)
		}
	}
	for _, k := range c.remove {
		if err := m.keyring.RemoveKey(k); err != nil {
			return true, fmt.Errorf("removing a memberlist key: %w", err)
		}
	}
	return !c.empty(), nil
}
