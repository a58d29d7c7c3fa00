package memberkey

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The Secret may hold several keys, so that the key can be rotated without splitting
// the speakers: every entry named DataKey or DataKey+"."+label is a key (in the format
// FromSecretData reads), and the entry PrimaryEntry names the one speakers encrypt
// with; they accept all. Without PrimaryEntry the primary is DataKey, so a Secret of
// one key reads as before. Rotation changes one entry at a time (add a key, name it
// primary, remove the old one), so a speaker reading the mounted files never sees
// half of a change.

// PrimaryEntry is the Secret entry holding the name of the primary key's entry.
const PrimaryEntry = "primary"

// Key is one key of the Secret: its entry's name and the AES key derived from it.
type Key struct {
	Name string
	AES  []byte
}

// Keyring is the Secret's keys, the primary first, then the others by entry name;
// no two hold the same AES key.
type Keyring []Key

// IsKeyEntry says whether a Secret entry of this name holds a key.
func IsKeyEntry(name string) bool {
	label, ok := strings.CutPrefix(name, DataKey+".")
	return name == DataKey || ok && label != ""
}

// KeyringFromSecretData reads every key of the Secret's data. It fails when an entry
// holds no usable key, when PrimaryEntry names no key entry, or when there is no key.
// Two entries holding the same key count once, under the primary's name or the first.
func KeyringFromSecretData(data map[string][]byte) (Keyring, error) {
	primary := DataKey
	if p, ok := data[PrimaryEntry]; ok {
		primary = strings.TrimSpace(string(p))
		if !IsKeyEntry(primary) {
			return nil, fmt.Errorf("memberlist Secret entry %q names %q, which is not a key entry (%s or %s.<label>)",
				PrimaryEntry, primary, DataKey, DataKey)
		}
	}
	if _, ok := data[primary]; !ok {
		if primary == DataKey {
			return nil, fmt.Errorf("memberlist Secret has no %q entry", DataKey)
		}
		return nil, fmt.Errorf("memberlist Secret entry %q names %q, which the Secret does not hold", PrimaryEntry, primary)
	}
	names := []string{primary}
	for name := range data {
		if IsKeyEntry(name) && name != primary {
			names = append(names, name)
		}
	}
	slices.Sort(names[1:])
	var ring Keyring
	for _, name := range names {
		k, err := derive(data[name])
		if err != nil {
			return nil, fmt.Errorf("memberlist Secret entry %q: %w", name, err)
		}
		if ring.Index(k) < 0 {
			ring = append(ring, Key{Name: name, AES: k})
		}
	}
	return ring, nil
}

// ReadDir reads the keyring from the Secret mounted at dir (one file per entry).
// The kubelet swaps a new version of the whole Secret in at once through the
// "..data" link; the files are read through it, so that all come from one version.
func ReadDir(dir string) (Keyring, error) {
	snap := dir
	if d, err := filepath.EvalSymlinks(filepath.Join(dir, "..data")); err == nil {
		snap = d
	}
	entries, err := os.ReadDir(snap)
	if err != nil {
		return nil, fmt.Errorf("reading memberlist keys: %w", err)
	}
	data := map[string][]byte{}
	found := false
	for _, e := range entries {
		if name := e.Name(); IsKeyEntry(name) || name == PrimaryEntry {
			b, err := os.ReadFile(filepath.Join(snap, name))
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("memberlist keys in %s changed while being read: %w", dir, err)
			}
			if err != nil {
				return nil, fmt.Errorf("reading memberlist keys: %w", err)
			}
			data[name] = b
			found = found || IsKeyEntry(name)
		}
	}
	if !found {
		// An optional Secret volume is an empty directory until the Secret exists.
		return nil, fmt.Errorf("no memberlist keys in %s: %w", dir, fs.ErrNotExist)
	}
	ring, err := KeyringFromSecretData(data)
	if err != nil {
		return nil, fmt.Errorf("memberlist keys in %s: %w", dir, err)
	}
	return ring, nil
}

// Primary is the key speakers encrypt with.
func (r Keyring) Primary() []byte {
	if len(r) == 0 {
		return nil
	}
	return r[0].AES
}

// AES returns the AES keys, the primary first.
func (r Keyring) AES() [][]byte {
	out := make([][]byte, len(r))
	for i, k := range r {
		out[i] = k.AES
	}
	return out
}

// Index is the position of the AES key k, or -1.
func (r Keyring) Index(k []byte) int {
	return slices.IndexFunc(r, func(x Key) bool { return string(x.AES) == string(k) })
}

// Fingerprint names an AES key without revealing it: the first 8 bytes of a sha256
// of the key under a fixed prefix, in hex. Speakers publish the fingerprints of the
// keys they hold; an 8-byte hash of a 32-byte key gives nothing to guess from, but
// one of a short key typed by hand could be searched offline, which is why the
// herald command makes 32 random bytes.
func Fingerprint(aes []byte) string {
	h := sha256.New()
	h.Write([]byte("herald memberlist key\x00"))
	h.Write(aes)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Report is the fingerprints of the keys, the primary's first and the others in
// lexical order, joined by commas: what a speaker publishes of its keyring.
func Report(keys [][]byte) string {
	if len(keys) == 0 {
		return ""
	}
	others := make([]string, 0, len(keys)-1)
	for _, k := range keys[1:] {
		others = append(others, Fingerprint(k))
	}
	slices.Sort(others)
	return strings.Join(append([]string{Fingerprint(keys[0])}, others...), ",")
}

// ParseReport splits a Report into the primary's fingerprint and all fingerprints
// (the primary's included).
func ParseReport(s string) (primary string, all []string) {
	if s == "" {
		return "", nil
	}
	all = strings.Split(s, ",")
	return all[0], all
}

// ReportAnnotation is the annotation of a speaker's heartbeat Lease holding the
// Report of the keys it holds, so that whoever rotates the key sees when every
// speaker has applied a step.
const ReportAnnotation = "herald.dev/memberlist-keys"
