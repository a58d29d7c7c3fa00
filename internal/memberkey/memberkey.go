// Package memberkey is the format of the memberlist Secret, which the controller
// creates and every speaker reads: its name, its data key, how a fresh value is made
// and how the AES key is derived from it. It lives below both so that the controller
// does not depend on the speaker to write what the speaker reads.
package memberkey

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
)

// SecretName is the memberlist Secret the controller creates in herald's namespace
// when it is missing.
const SecretName = "herald-memberlist"

// DataKey is the data key of the memberlist Secret; the speaker's Pod mounts the
// Secret so that this key becomes a file of the same name.
const DataKey = "secretkey"

// MinMaterial is the least number of key bytes accepted (after base64 decoding).
const MinMaterial = 16

// New returns a fresh value for the Secret's DataKey entry: 32 random bytes, standard
// base64.
func New() ([]byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("generating memberlist key: %w", err)
	}
	return []byte(base64.StdEncoding.EncodeToString(b[:])), nil
}

// FromSecretData derives the AES-256 memberlist key from the Secret's data. The value
// under DataKey may be base64 (standard, padded or not) or raw bytes; surrounding
// white space is ignored. The key is sha256 of the decoded material, so every speaker
// derives the same 32 bytes and all of the material counts.
//
// MetalLB writes sha256.New().Sum(secret)[:32]: Sum appends the digest of nothing to
// its argument, so its key is the secret's first 32 bytes padded with a constant,
// not a hash; material beyond 32 bytes is ignored. We hash properly instead (so
// herald speakers cannot join MetalLB speakers, which is intended).
//
// The Secret may hold several keys (keyring.go); this is the primary's AES key, once
// all of them have been checked.
func FromSecretData(data map[string][]byte) ([]byte, error) {
	ring, err := KeyringFromSecretData(data)
	if err != nil {
		return nil, err
	}
	return ring.Primary(), nil
}

// ReadFile reads the mounted Secret entry at path and derives the key as
// FromSecretData does. A missing, unreadable or bad file is an error naming path.
func ReadFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading memberlist key: %w", err)
	}
	k, err := derive(b)
	if err != nil {
		return nil, fmt.Errorf("memberlist key file %s: %w", path, err)
	}
	return k, nil
}

func derive(v []byte) ([]byte, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, fmt.Errorf("memberlist key %q is empty", DataKey)
	}
	material := v
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if d, err := enc.DecodeString(string(v)); err == nil {
			material = d
			break
		}
	}
	if len(material) < MinMaterial {
		return nil, fmt.Errorf("memberlist key %q has %d bytes of material, want at least %d", DataKey, len(material), MinMaterial)
	}
	sum := sha256.Sum256(material)
	return sum[:], nil
}
