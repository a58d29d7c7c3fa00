package members

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
)

// DefaultSecretName is the memberlist Secret the controller creates in herald's
// namespace when it is missing.
const DefaultSecretName = "herald-memberlist"

// SecretKeyName is the data key of the memberlist Secret (the controller creates the
// Secret when it is missing; the speaker mounts it at DefaultKeyFile).
const SecretKeyName = "secretkey"

// MinKeyMaterial is the least number of key bytes accepted (after base64 decoding).
const MinKeyMaterial = 16

// NewSecretKey returns a fresh value for the Secret's SecretKeyName entry: 32 random
// bytes, standard base64. The controller stores it when the Secret is missing.
func NewSecretKey() ([]byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("generating memberlist key: %w", err)
	}
	return []byte(base64.StdEncoding.EncodeToString(b[:])), nil
}

// KeyFromSecretData derives the AES-256 memberlist key from the Secret's data. The
// value under SecretKeyName may be base64 (standard, padded or not) or raw bytes;
// surrounding white space is ignored. The key is sha256 of the decoded material, so
// every speaker derives the same 32 bytes and all of the material counts.
//
// MetalLB writes sha256.New().Sum(secret)[:32]: Sum appends the digest of nothing to
// its argument, so its key is the secret's first 32 bytes padded with a constant,
// not a hash; material beyond 32 bytes is ignored. We hash properly instead (so
// herald speakers cannot join MetalLB speakers, which is intended).
func KeyFromSecretData(data map[string][]byte) ([]byte, error) {
	v, ok := data[SecretKeyName]
	if !ok {
		return nil, fmt.Errorf("memberlist Secret has no %q entry", SecretKeyName)
	}
	return deriveKey(v)
}

// ReadKeyFile reads the mounted Secret entry at path and derives the key as
// KeyFromSecretData does. A missing, unreadable or bad file is an error naming path.
func ReadKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading memberlist key: %w", err)
	}
	k, err := deriveKey(b)
	if err != nil {
		return nil, fmt.Errorf("memberlist key file %s: %w", path, err)
	}
	return k, nil
}

// LoadKey sets c.SecretKey from c.KeyFile unless it is already set.
func (c *Config) LoadKey() error {
	if len(c.SecretKey) > 0 {
		return nil
	}
	if c.KeyFile == "" {
		return errors.New("memberlist key: --ml-secret-key-path is empty; encryption is mandatory")
	}
	k, err := ReadKeyFile(c.KeyFile)
	if err != nil {
		return err
	}
	c.SecretKey = k
	return nil
}

func deriveKey(v []byte) ([]byte, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, fmt.Errorf("memberlist key %q is empty", SecretKeyName)
	}
	material := v
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if d, err := enc.DecodeString(string(v)); err == nil {
			material = d
			break
		}
	}
	if len(material) < MinKeyMaterial {
		return nil, fmt.Errorf("memberlist key %q has %d bytes of material, want at least %d", SecretKeyName, len(material), MinKeyMaterial)
	}
	sum := sha256.Sum256(material)
	return sum[:], nil
}
