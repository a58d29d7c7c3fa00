package records

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/speaker/quorum"
)

// recordFixture is, at a real API server, the speakers a, b, c, x (and o) writing
// their records, and the reading of a as Run sets it up (reader).
type recordFixture struct {
	env *testenv.Env
	ctx context.Context
	ns  string
	cfg Config
	// writers write the others' records, each as its own speaker would.
	writers map[string]*Keeper
}

func newRecordFixture(t *testing.T) *recordFixture {
	f := &recordFixture{env: testenv.Start(t), ctx: t.Context(), ns: "herald-system", writers: map[string]*Keeper{},
		cfg: Config{Renew: time.Second, FastRenew: 200 * time.Millisecond, Duration: 30 * time.Second}}
	f.env.CreateNamespace(t, f.ns)
	return f
}

// write writes node's record saying it hears members, in mode; its labels name the
// speakers of the test it does not hear, as publishRecord's would.
func (f *recordFixture) write(t *testing.T, node string, members []string, mode quorum.Mode) {
	t.Helper()
	w := f.writers[node]
	if w == nil {
		w = newKeeper(node, f.ns, f.cfg, f.env.Client, f.env.Client, f.env.Client, func() {}, func(string, []string) {}, logr.Discard())
		f.writers[node] = w
	}
	misses := missed(node, []string{"a", "b", "c", "x", "o"}, members)
	if err := w.writeRecord(f.ctx, Wish{Members: members, Misses: misses, Mode: mode}); err != nil {
		t.Fatal(err)
	}
}

// reader starts a's records with its watches (view configured by viewCfg) and cache,
// as Run does; events counts the changes they report.
func (f *recordFixture) reader(t *testing.T, viewCfg Config) (r *Keeper, events *atomic.Int32) {
	t.Helper()
	c, err := cache.New(f.env.Config, cache.Options{Scheme: scheme.New(), ByObject: map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: CacheScope(f.ns, "a"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(f.env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	events = &atomic.Int32{}
	r = newKeeper("a", f.ns, f.cfg, c, f.env.Client, f.env.Client, func() { events.Add(1) }, func(string, []string) {}, logr.Discard())
	r.view = newRecordWatches(f.ctx, f.ns, "a", wc, r.handler, func() {}, viewCfg, r.freshnessAsOf, logr.Discard())
	if err := r.WatchCache(f.ctx, c); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(f.ctx) }()
	if !c.WaitForCacheSync(f.ctx) {
		t.Fatal("cache did not sync")
	}
	return r, events
}

// digest writes the records digest as the controller would, of the records stored now
// (or of those given), written at at, and returns the records it lists.
func (f *recordFixture) digest(t *testing.T, at time.Time, given ...*coordinationv1.Lease) []*coordinationv1.Lease {
	t.Helper()
	leases := given
	if leases == nil {
		var l coordinationv1.LeaseList
		if err := f.env.Client.List(f.ctx, &l, client.InNamespace(f.ns), client.HasLabels{Label}); err != nil {
			t.Fatal(err)
		}
		for i := range l.Items {
			leases = append(leases, &l.Items[i])
		}
	}
	data, _, err := recordformat.EncodeDigest(at, leases)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: recordformat.DigestName}, Data: data}
	if err := f.env.Client.Update(f.ctx, cm); apierrors.IsNotFound(err) {
		err = f.env.Client.Create(f.ctx, cm)
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return leases
}
