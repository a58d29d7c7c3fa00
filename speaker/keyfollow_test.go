package speaker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/speaker/members"
)

// TestKeyFollower follows a Secret mounted as the kubelet does (files behind a
// "..data" link swapped at once) into a real memberlist keyring.
func TestKeyFollower(t *testing.T) {
	dir := t.TempDir()
	version := 0
	// mount writes the Secret's entries as a new version and swaps it in.
	mount := func(data map[string]string) {
		version++
		v := filepath.Join(dir, "..v"+string(rune('0'+version)))
		if err := os.Mkdir(v, 0o700); err != nil {
			t.Fatal(err)
		}
		for k, val := range data {
			if err := os.WriteFile(filepath.Join(v, k), []byte(val), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(filepath.Base(v), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	aes := func(v string) []byte {
		k, err := memberkey.FromSecretData(map[string][]byte{memberkey.DataKey: []byte(v)})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	const old, next = "old-key-material-0123", "next-key-material-0123"

	cfg := members.DefaultConfig()
	cfg.NodeName, cfg.BindAddr, cfg.BindPort = "a", "127.0.0.1", 0
	cfg.KeyFile = filepath.Join(dir, memberkey.DataKey)
	cfg.SecretKey = aes(old)
	m, err := members.Start(cfg, logr.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Shutdown() }()
	f := newKeyFollower(cfg.ReadKeys, m.SetKeys, m.Keys, logr.Discard())
	told := 0
	f.changed = func() { told++ }
	reg := prometheus.NewRegistry()
	if err := f.register(reg); err != nil {
		t.Fatal(err)
	}
	check := func(step string, want []string, changes, unusable float64) {
		t.Helper()
		f.sync()
		var wantAES [][]byte
		for _, w := range want {
			wantAES = append(wantAES, aes(w))
		}
		if got, w := memberkey.Report(m.Keys()), memberkey.Report(wantAES); got != w {
			t.Errorf("%s: keyring %s, want %s", step, got, w)
		}
		if got := metricValue(t, f.keys); got != float64(len(want)) {
			t.Errorf("%s: herald_speaker_memberlist_keys = %v, want %d", step, got, len(want))
		}
		if got := metricValue(t, f.changes); got != changes || float64(told) != changes {
			t.Errorf("%s: key changes = %v (told %d), want %v", step, got, told, changes)
		}
		if got := metricValue(t, f.unreadable); got != unusable {
			t.Errorf("%s: unusable = %v, want %v", step, got, unusable)
		}
	}

	check("not mounted yet", []string{old}, 0, 0)
	mount(map[string]string{memberkey.DataKey: old})
	check("the same key mounted", []string{old}, 0, 0)
	mount(map[string]string{memberkey.DataKey: old, "secretkey.next": next})
	check("add", []string{old, next}, 1, 0)
	mount(map[string]string{memberkey.DataKey: old, "secretkey.next": next, memberkey.PrimaryEntry: "secretkey.next"})
	check("use", []string{next, old}, 2, 0)
	mount(map[string]string{memberkey.DataKey: old, "secretkey.next": next, memberkey.PrimaryEntry: "secretkey.gone"})
	check("a primary naming no key changes nothing", []string{next, old}, 2, 1)
	mount(map[string]string{"secretkey.next": next, memberkey.PrimaryEntry: "secretkey.next"})
	check("remove", []string{next}, 3, 0)
}

func metricValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Gauge != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}
