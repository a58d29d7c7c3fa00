package speaker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/memberkey"
)

// loadKey sets the memberlist key: from the mounted Secret file when it exists, else
// from the Secret itself through the API server, waiting up to cfg.KeyWait for the
// controller to create it. Without a key the speaker does not start: there is no
// plain-text cluster.
func loadKey(ctx context.Context, api client.Reader, cfg *Config, log logr.Logger) error {
	if len(cfg.Members.SecretKey) > 0 {
		return nil
	}
	if cfg.Members.KeyFile != "" {
		if _, err := os.Stat(cfg.Members.KeyFile); err == nil || cfg.SecretName == "" {
			return cfg.Members.LoadKey()
		}
	}
	if cfg.SecretName == "" {
		return errors.New("memberlist key: neither --ml-secret-key-path nor --ml-secret-name is set; encryption is mandatory")
	}
	name := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.SecretName}
	deadline := time.Now().Add(cfg.KeyWait)
	for {
		var s corev1.Secret
		err := api.Get(ctx, name, &s)
		if err == nil {
			ring, err := memberkey.KeyringFromSecretData(s.Data)
			if err != nil {
				return fmt.Errorf("memberlist Secret %s: %w", name, err)
			}
			cfg.Members.SecretKey, cfg.Members.OtherKeys = ring.Primary(), ring.AES()[1:]
			return nil
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return fmt.Errorf("memberlist key: file %q does not exist and Secret %s: %w (the controller creates it; is it running?)",
				cfg.Members.KeyFile, name, err)
		}
		log.Info("waiting for the memberlist Secret", "secret", name)
		select {
		case <-ctx.Done():
			return fmt.Errorf("memberlist key: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
