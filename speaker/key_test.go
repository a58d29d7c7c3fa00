package speaker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretReader answers Get of Secrets from a map; everything else is not found.
type secretReader struct {
	client.Reader
	secrets map[string]map[string][]byte
}

func (r secretReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	data, ok := r.secrets[key.String()]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	obj.(*corev1.Secret).Data = data
	return nil
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secretkey")
	if err := os.WriteFile(file, []byte("c2VjcmV0LXNlY3JldC1zZWNyZXQ="), 0o600); err != nil {
		t.Fatal(err)
	}
	good := map[string]map[string][]byte{"herald-system/herald-memberlist": {"secretkey": []byte("0123456789abcdef-from-api")}}
	for _, tc := range []struct {
		name    string
		file    string
		secrets map[string]map[string][]byte
		wantErr string
	}{
		{"mounted file wins", file, nil, ""},
		{"no file: the Secret through the API", filepath.Join(dir, "missing"), good, ""},
		{"neither: a clear error", filepath.Join(dir, "missing"), nil,
			`file "` + filepath.Join(dir, "missing") + `" does not exist and Secret herald-system/herald-memberlist: secrets "herald-memberlist" not found (the controller creates it; is it running?)`},
		{"unusable Secret", filepath.Join(dir, "missing"), map[string]map[string][]byte{"herald-system/herald-memberlist": {"other": []byte("x")}},
			`memberlist Secret herald-system/herald-memberlist: memberlist Secret has no "secretkey" entry`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Namespace, cfg.KeyWait, cfg.Members.KeyFile = "herald-system", 0, tc.file
			err := loadKey(context.Background(), secretReader{secrets: tc.secrets}, &cfg, logr.Discard())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("loadKey: %v", err)
			case tc.wantErr == "" && len(cfg.Members.SecretKey) != 32:
				t.Fatalf("key has %d bytes, want 32", len(cfg.Members.SecretKey))
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}
