package controllers

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/internal/selectwatch"
)

// The controller watches the speakers' records (one event per record write) and
// writes the records digest that the speakers of a large cluster read while they are
// out of Quorum instead of every record (internal/recordformat says why).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=create,namespace=herald-system
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;update,namespace=herald-system,resourceNames=herald-records

var (
	digestWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_records_digest_writes_total",
		Help: "Writes of the records digest by the controller (only the leader writes it).",
	})
	digestRecords = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "herald_records_digest_records",
		Help: "Speaker records the records digest last written lists.",
	})
	digestBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "herald_records_digest_bytes",
		Help: "Size of the records digest last written (a ConfigMap holds at most 1 MiB).",
	})
)

func init() { metrics.Registry.MustRegister(digestWrites, digestRecords, digestBytes) }

// RecordDigester writes the records digest in Namespace from its own watch of the
// speakers' records (the manager's cache holds the heartbeats, a different selection
// of the same kind).
type RecordDigester struct {
	Watch     client.WithWatch // lists and watches the records
	API       client.Reader    // reads straight from the API server
	Client    client.Client
	Namespace string
	Log       logr.Logger

	now   func() time.Time
	store toolscache.Store
	// digest is the ConfigMap as last written or read; wroteAt the last write's time
	// by this controller's clock.
	digest  *aggregate[*corev1.ConfigMap]
	wroteAt time.Time
}

// NeedLeaderElection: only the leader writes the digest.
func (d *RecordDigester) NeedLeaderElection() bool { return true }

// Start writes the digest when a record changes, at most once per
// recordformat.DigestGap, and renews it every recordformat.DigestRenew, until ctx
// ends.
func (d *RecordDigester) Start(ctx context.Context) error {
	if d.now == nil {
		d.now = time.Now
	}
	kick := newKicker()
	w := selectwatch.Start(ctx, d.Watch, d.Namespace, "the speakers' records", func() client.ObjectList { return &coordinationv1.LeaseList{} }, &coordinationv1.Lease{},
		func(o *client.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{recordformat.Label: "true"})
		},
		toolscache.ResourceEventHandlerFuncs{
			AddFunc: kick.poke, UpdateFunc: func(_, cur any) { kick.poke(cur) }, DeleteFunc: kick.poke,
		})
	d.store = w.Store
	if !toolscache.WaitForCacheSync(ctx.Done(), w.Synced) {
		return nil
	}
	runPasses(ctx, kick, d.pass, d.now, time.Second, d.Log, "writing the records digest")
	return nil
}

// pass writes the digest if the records changed or its renewal is due, and returns
// when to look again.
func (d *RecordDigester) pass(ctx context.Context) (time.Time, error) {
	now := d.now()
	if !d.wroteAt.IsZero() && now.Sub(d.wroteAt) < recordformat.DigestGap {
		return d.wroteAt.Add(recordformat.DigestGap), nil
	}
	objs := d.store.List()
	leases := make([]*coordinationv1.Lease, 0, len(objs))
	for _, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok {
			leases = append(leases, l)
		}
	}
	data, skipped, err := recordformat.EncodeDigest(now, leases)
	if err != nil {
		return time.Time{}, err
	}
	renewal := d.wroteAt.Add(recordformat.DigestRenew)
	if cm, ok := d.aggregate().current(); ok && recordformat.SameRecords(data, cm.Data) && now.Before(renewal) {
		return renewal, nil
	}
	if err := d.write(ctx, data); err != nil {
		return time.Time{}, err
	}
	if skipped > 0 {
		d.Log.V(1).Info("records digest: Leases labelled as records that a speaker would not read left out", "leases", skipped)
	}
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	digestWrites.Inc()
	digestRecords.Set(float64(len(leases) - skipped))
	digestBytes.Set(float64(size))
	return now.Add(recordformat.DigestRenew), nil
}

// write creates or updates the digest's ConfigMap.
func (d *RecordDigester) write(ctx context.Context, data map[string]string) error {
	if err := d.aggregate().put(ctx, func(cm *corev1.ConfigMap) { cm.Data = data }); err != nil {
		return err
	}
	d.wroteAt = d.now()
	return nil
}

func (d *RecordDigester) aggregate() *aggregate[*corev1.ConfigMap] {
	if d.digest == nil {
		d.digest = &aggregate[*corev1.ConfigMap]{what: "records digest", api: d.API, writer: d.Client,
			key:    types.NamespacedName{Namespace: d.Namespace, Name: recordformat.DigestName},
			newObj: func() *corev1.ConfigMap { return &corev1.ConfigMap{} }}
	}
	return d.digest
}
