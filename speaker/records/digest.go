package records

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/internal/selectwatch"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch,namespace=herald-system,resourceNames=herald-records

// digestWatch watches the records digest that herald's controller writes
// (internal/recordformat says why), and while it is in use hands each change of a
// record it lists to the records' handler, as a watch of the records would: a version
// not seen before, or a record gone. recordWatches decides when it is in use.
type digestWatch struct {
	*selectwatch.Watch // Stop, Synced: of the ConfigMap's informer
	namespace          string
	handler            func(gone bool) toolscache.ResourceEventHandler
	poke               func()
	log                logr.Logger

	mu sync.Mutex
	// digest is the digest as last decoded (zero: none, or unreadable).
	digest recordformat.Digest
	// inUse: its records are handed to the handler; fed are those handed, by name.
	inUse bool
	fed   map[string]*coordinationv1.Lease
	// badVersion is the ConfigMap version last found unreadable (logged once).
	badVersion string
	// expiryPoke is the digest's expiry a decision is due at (see apply).
	expiryPoke time.Time
}

// watchDigest starts a digestWatch until ctx ends or stop is called.
func watchDigest(ctx context.Context, c client.WithWatch, namespace string, handler func(gone bool) toolscache.ResourceEventHandler, poke func(),
	events prometheus.Counter, log logr.Logger) *digestWatch {
	d := &digestWatch{namespace: namespace, handler: handler, poke: poke, log: log}
	d.Watch = selectwatch.Start(ctx, c, namespace, "the records digest", func() client.ObjectList { return &corev1.ConfigMapList{} }, &corev1.ConfigMap{},
		func(o *client.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", recordformat.DigestName)
		},
		toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if !initial {
					events.Inc()
				}
				d.apply(obj)
			},
			UpdateFunc: func(_, obj any) { events.Inc(); d.apply(obj) },
			DeleteFunc: func(any) { events.Inc(); d.apply(nil) },
		})
	return d
}

// apply takes a new version of the digest's ConfigMap (nil: deleted).
func (d *digestWatch) apply(obj any) {
	cm, _ := obj.(*corev1.ConfigMap)
	var dg recordformat.Digest
	if cm != nil {
		var err error
		if dg, err = recordformat.DecodeDigest(d.namespace, cm.Data); err != nil {
			d.mu.Lock()
			if d.badVersion != cm.ResourceVersion {
				d.badVersion = cm.ResourceVersion
				d.log.Error(err, "the records digest is unreadable; watching the records instead")
			}
			d.mu.Unlock()
			dg = recordformat.Digest{}
		}
	}
	d.mu.Lock()
	prev := d.digest
	d.digest = dg
	// A decision follows what it reads, and one that does not read it yet may start
	// to (or stop waiting for it) when it appears, goes or changes size; the renewals
	// of a digest it does not use change nothing. While in use, a decision is due when
	// it expires, in case no renewal comes: a speaker in Quorum decides on events only.
	poke := d.inUse || prev.At.IsZero() != dg.At.IsZero() || len(prev.Records) != len(dg.Records)
	if d.inUse {
		d.feedLocked(false)
		d.pokeAtExpiryLocked()
	}
	d.mu.Unlock()
	if poke {
		d.poke()
	}
}

// feedLocked hands the handler what changed in the digest since it was last fed:
// records first seen (as listed when initial: a digest read when it comes into use
// tells nothing of when they changed), new versions, and records gone. Under mu.
func (d *digestWatch) feedLocked(initial bool) {
	now := make(map[string]*coordinationv1.Lease, len(d.digest.Records))
	h := d.handler(false)
	for _, l := range d.digest.Records {
		now[l.Name] = l
		switch prev := d.fed[l.Name]; {
		case prev == nil:
			h.OnAdd(l, initial)
		case prev.UID != l.UID || prev.ResourceVersion != l.ResourceVersion:
			h.OnUpdate(prev, l)
		}
	}
	if d.digest.At.IsZero() {
		// Unreadable or deleted: the records are not gone, only their digest.
		return
	}
	gone := d.handler(true)
	for name, prev := range d.fed {
		if now[name] == nil {
			gone.OnDelete(prev)
		}
	}
	d.fed = now
}

// pokeAtExpiryLocked asks for a decision when the digest in use expires, once per
// expiry. Under mu.
func (d *digestWatch) pokeAtExpiryLocked() {
	if exp := d.digest.At.Add(d.digest.Duration); !d.digest.At.IsZero() && !exp.Equal(d.expiryPoke) {
		d.expiryPoke = exp
		time.AfterFunc(time.Until(exp), d.poke)
	}
}

// state says whether the digest is usable as of asOf and how many records it lists;
// false until the watch has synced.
func (d *digestWatch) state(asOf time.Time) (usable bool, records int) {
	if d == nil || !d.Synced() {
		return false, 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.digest.Usable(asOf), len(d.digest.Records)
}

// revision returns the highest etcd revision among the versions of the records the
// digest in use lists (false: not in use, or none parses). The controller writes it
// from one snapshot of its watch of the records, which brings every write in the
// order of its revision: the digest holds every record as it stood once the write of
// that revision was made, or later.
func (d *digestWatch) revision() (uint64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.inUse {
		return 0, false
	}
	var top uint64
	for _, l := range d.digest.Records {
		if rev, err := strconv.ParseUint(l.ResourceVersion, 10, 64); err == nil {
			top = max(top, rev)
		}
	}
	return top, top > 0
}

// use starts or stops handing the records to the handler. Starting, it hands every
// record the digest lists as listed (not seen changing).
func (d *digestWatch) use(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case on && !d.inUse:
		d.inUse, d.fed = true, nil
		d.feedLocked(true)
		d.pokeAtExpiryLocked()
	case !on && d.inUse:
		d.inUse, d.fed = false, nil
	}
}

// used says whether the digest's records are in use.
func (d *digestWatch) used() bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inUse
}

// byName returns the records the digest lists, by name, in use or not. Read only.
func (d *digestWatch) byName() map[string]*coordinationv1.Lease {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]*coordinationv1.Lease, len(d.digest.Records))
	for _, l := range d.digest.Records {
		out[l.Name] = l
	}
	return out
}

// leases returns the records the digest lists while it is in use. Read only.
func (d *digestWatch) leases() []*coordinationv1.Lease {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.inUse {
		return nil
	}
	return d.digest.Records
}
