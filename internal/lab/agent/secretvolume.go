package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SecretVolume is a Secret the agent keeps mounted in Dir as a kubelet keeps a Secret
// volume: every entry a file, a new version of all of them swapped in at once, so
// that a speaker sees a Secret's change while it runs, as in a cluster.
type SecretVolume struct {
	Namespace, Name, Dir string
}

// ParseSecretVolume reads "NAMESPACE/NAME:DIR".
func ParseSecretVolume(s string) (SecretVolume, error) {
	ref, dir, ok := strings.Cut(s, ":")
	ns, name, ok2 := strings.Cut(ref, "/")
	if !ok || !ok2 || ns == "" || name == "" || dir == "" {
		return SecretVolume{}, fmt.Errorf("secret volume %q: want NAMESPACE/NAME:DIR", s)
	}
	return SecretVolume{Namespace: ns, Name: name, Dir: dir}, nil
}

// mountSecret rewrites v.Dir whenever the Secret changes, polling every period (a
// kubelet's sync is slower; the speaker does not depend on the pace). A missing
// Secret leaves the volume as it is, as an optional volume.
func (a *Agent) mountSecret(ctx context.Context, v SecretVolume, period time.Duration) {
	var version string
	for {
		s, err := a.cs.CoreV1().Secrets(v.Namespace).Get(ctx, v.Name, metav1.GetOptions{})
		switch {
		case err == nil && s.ResourceVersion != version:
			if err := writeVolume(v.Dir, s.Data); err != nil {
				a.log.Printf("secret volume %s/%s: %v", v.Namespace, v.Name, err)
			} else {
				version = s.ResourceVersion
			}
		case err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil:
			a.log.Printf("secret volume %s/%s: %v", v.Namespace, v.Name, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

// writeVolume writes data as a new version directory, points "..data" at it in one
// rename, links each entry's name through "..data", and removes what the previous
// version had that this one lacks: the kubelet's atomic writer, in short.
func writeVolume(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	version := "..v" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := os.Mkdir(filepath.Join(dir, version), 0o755); err != nil {
		return err
	}
	for name, b := range data {
		if err := os.WriteFile(filepath.Join(dir, version, name), b, 0o400); err != nil {
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(version, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for name := range data {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				return err
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if n := e.Name(); !strings.HasPrefix(n, "..") {
			if _, ok := data[n]; !ok {
				_ = os.Remove(filepath.Join(dir, n))
			}
		}
	}
	if old != "" && old != version {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
