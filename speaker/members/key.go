package members

import (
	"errors"
	"path/filepath"

	"herald.dev/herald/internal/memberkey"
)

// LoadKey sets c.SecretKey and c.OtherKeys from the keys at c.KeyFile (ReadKeys)
// unless a key is already set.
func (c *Config) LoadKey() error {
	if len(c.SecretKey) > 0 {
		return nil
	}
	ring, err := c.ReadKeys()
	if err != nil {
		return err
	}
	c.SecretKey, c.OtherKeys = ring.Primary(), ring.AES()[1:]
	return nil
}

// ReadKeys reads the keyring at c.KeyFile. A file named as the Secret's entry
// (memberkey.DataKey) is read with its siblings, as the mounted Secret's keyring
// (memberkey.ReadDir); a file of any other name holds the one key.
func (c *Config) ReadKeys() (memberkey.Keyring, error) {
	if c.KeyFile == "" {
		return nil, errors.New("memberlist key: --ml-secret-key-path is empty; encryption is mandatory")
	}
	if filepath.Base(c.KeyFile) == memberkey.DataKey {
		return memberkey.ReadDir(filepath.Dir(c.KeyFile))
	}
	k, err := memberkey.ReadFile(c.KeyFile)
	if err != nil {
		return nil, err
	}
	return memberkey.Keyring{{Name: memberkey.DataKey, AES: k}}, nil
}
