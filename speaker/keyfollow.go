package speaker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"herald.dev/herald/internal/memberkey"
)

// The speaker follows the mounted memberlist Secret while it runs. The kubelet
// rewrites a Secret volume in place when the Secret changes (not a subPath mount),
// so reading the files again needs no more RBAC and no watch of Secrets; a read
// every few seconds costs nothing next to the kubelet's own delay. Following the
// files also covers a speaker that started from the API (the volume is optional): the
// files appear once the kubelet mounts them.

// keyFollower applies the mounted Secret's keyring to memberlist.
type keyFollower struct {
	read func() (memberkey.Keyring, error)
	set  func(keys [][]byte) (bool, error)
	have func() [][]byte
	// changed, when set, is told after the keyring changed.
	changed func()
	log     logr.Logger

	keys       prometheus.Gauge
	changes    prometheus.Counter
	unreadable prometheus.Gauge
	lastErr    string
}

func newKeyFollower(read func() (memberkey.Keyring, error), set func([][]byte) (bool, error), have func() [][]byte, log logr.Logger) *keyFollower {
	return &keyFollower{
		read: read, set: set, have: have, log: log,
		keys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_speaker_memberlist_keys",
			Help: "Keys in this speaker's memberlist keyring (it encrypts with one and accepts all); more than 1 while a key is being rotated.",
		}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_speaker_memberlist_key_changes_total",
			Help: "Changes of the memberlist Secret's keys applied to this speaker's keyring while running.",
		}),
		unreadable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_speaker_memberlist_keys_unusable",
			Help: "1 while the mounted memberlist Secret cannot be used (the speaker keeps the keys it has; see the log).",
		}),
	}
}

func (f *keyFollower) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{f.keys, f.changes, f.unreadable} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering the memberlist key metrics: %w", err)
		}
	}
	return nil
}

// sync reads the Secret once and applies it. A missing file is not a fault (the
// speaker started from the API, and the kubelet has not mounted it yet); a Secret
// that cannot be used leaves the keyring as it is, logged once per distinct fault.
func (f *keyFollower) sync() {
	defer func() { f.keys.Set(float64(len(f.have()))) }()
	ring, err := f.read()
	if errors.Is(err, fs.ErrNotExist) {
		f.unreadable.Set(0)
		return
	}
	if err == nil {
		var changed bool
		if changed, err = f.set(ring.AES()); changed && err == nil {
			f.changes.Inc()
			if f.changed != nil {
				f.changed()
			}
			f.log.Info("applied the memberlist Secret's keys", "keys", len(ring), "primary", ring[0].Name,
				"fingerprints", memberkey.Report(ring.AES()))
		}
	}
	if err != nil {
		f.unreadable.Set(1)
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			f.log.Error(err, "the memberlist Secret cannot be used; keeping the keys this speaker has")
		}
		return
	}
	f.unreadable.Set(0)
	f.lastErr = ""
}

// run syncs every period until ctx ends.
func (f *keyFollower) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		f.sync()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
