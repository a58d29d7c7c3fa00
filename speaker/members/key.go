package members

import (
	"errors"

	"herald.dev/herald/internal/memberkey"
)

// LoadKey sets c.SecretKey from c.KeyFile unless it is already set.
func (c *Config) LoadKey() error {
	if len(c.SecretKey) > 0 {
		return nil
	}
	if c.KeyFile == "" {
		return errors.New("memberlist key: --ml-secret-key-path is empty; encryption is mandatory")
	}
	k, err := memberkey.ReadFile(c.KeyFile)
	if err != nil {
		return err
	}
	c.SecretKey = k
	return nil
}
