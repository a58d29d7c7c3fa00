package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"herald.dev/herald/internal/beatsummary"
)

// The controller watches the speakers' heartbeats (one event per renewal, N/10 a
// second, as the node lifecycle controller watches the kubelets' Leases) and writes
// the heartbeat summary that speakers out of touch with some peers read instead of
// those peers' heartbeats (internal/beatsummary says why).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch,namespace=herald-system
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=update,namespace=herald-system,resourceNames=herald-heartbeats

// summaryWriteGap is the least time between two writes of the summary. Speakers start
// or lose the API server by the hundred at once; each change rewritten at once would
// send every reader one event per speaker. A speaker whose heartbeat turns stale
// counts as fresh meanwhile, which only delays a majority.
const summaryWriteGap = time.Second

var heartbeatsSummarized = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "herald_heartbeat_summary_speakers",
	Help: "Speakers' heartbeats by state (fresh, stale) as the heartbeat summary last written by the controller says (only the leader exports it).",
}, []string{"state"})

func init() { metrics.Registry.MustRegister(heartbeatsSummarized) }

// HeartbeatSummarizer writes the heartbeat summary in Namespace. Heartbeats are read
// from Cache, which must hold HeartbeatLeases(Namespace).
type HeartbeatSummarizer struct {
	Cache     cache.Cache
	API       client.Reader // reads straight from the API server
	Client    client.Client
	Namespace string
	Log       logr.Logger

	now func() time.Time
	// confirmed holds heartbeats read straight from the API server because the cache
	// had them stale: a lagging watch must not make a live speaker stale.
	confirmed map[string]time.Time
	// summary is the Lease as last written or read; last what it says.
	summary *aggregate[*coordinationv1.Lease]
	last    beatsummary.Summary
	// wroteAt is the last write's time by this controller's clock.
	wroteAt time.Time
}

// NeedLeaderElection: only the leader writes the summary.
func (s *HeartbeatSummarizer) NeedLeaderElection() bool { return true }

// Start writes the summary whenever a heartbeat turns fresh or stale, and renews it
// every beatsummary.Renew, until ctx ends.
func (s *HeartbeatSummarizer) Start(ctx context.Context) error {
	if s.now == nil {
		s.now = time.Now
	}
	s.confirmed = map[string]time.Time{}
	kick := newKicker()
	inf, err := s.Cache.GetInformer(ctx, &coordinationv1.Lease{})
	if err != nil {
		return fmt.Errorf("heartbeat summary: watching the heartbeats: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: kick.poke, UpdateFunc: func(_, cur any) { kick.poke(cur) }, DeleteFunc: kick.poke,
	}); err != nil {
		return fmt.Errorf("heartbeat summary: watching the heartbeats: %w", err)
	}
	if !s.Cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	runPasses(ctx, kick, s.pass, s.now, summaryWriteGap, s.Log, "writing the heartbeat summary")
	return nil
}

// pass writes the summary if it changed or its renewal is due, and returns when to
// look again.
func (s *HeartbeatSummarizer) pass(ctx context.Context) (time.Time, error) {
	now := s.now()
	if !s.wroteAt.IsZero() && now.Sub(s.wroteAt) < summaryWriteGap {
		return s.wroteAt.Add(summaryWriteGap), nil
	}
	beats, err := s.beats(ctx)
	if err != nil {
		return time.Time{}, err
	}
	fresh, stale, next := beatsummary.Summarize(beats, now)
	if s.confirm(ctx, stale) {
		if beats, err = s.beats(ctx); err != nil {
			return time.Time{}, err
		}
		fresh, stale, next = beatsummary.Summarize(beats, now)
	}
	sum := beatsummary.Summary{At: now, Duration: beatsummary.Duration, Fresh: fresh, Stale: stale}
	renewal := s.last.At.Add(beatsummary.Renew)
	if _, ok := s.aggregate().current(); ok && sum.SameSets(s.last) && now.Before(renewal) {
		return earliest(next, renewal), nil
	}
	if err := s.write(ctx, sum); err != nil {
		return time.Time{}, err
	}
	heartbeatsSummarized.WithLabelValues("fresh").Set(float64(len(fresh)))
	heartbeatsSummarized.WithLabelValues("stale").Set(float64(len(stale)))
	return earliest(next, now.Add(beatsummary.Renew)), nil
}

// beats returns the heartbeats in the cache, each with the newer of its cached and
// confirmed renewal.
func (s *HeartbeatSummarizer) beats(ctx context.Context) ([]beatsummary.Beat, error) {
	var l coordinationv1.LeaseList
	if err := s.Cache.List(ctx, &l, client.InNamespace(s.Namespace), client.HasLabels{beatsummary.HeartbeatLabel}); err != nil {
		return nil, fmt.Errorf("listing the heartbeats: %w", err)
	}
	out := make([]beatsummary.Beat, 0, len(l.Items))
	seen := make(map[string]bool, len(l.Items))
	for i := range l.Items {
		b, ok := beatOf(&l.Items[i])
		if !ok {
			continue
		}
		seen[b.Node] = true
		if at, ok := s.confirmed[b.Node]; ok {
			if at.After(b.RenewedAt) {
				b.RenewedAt = at
			} else {
				delete(s.confirmed, b.Node) // the cache caught up
			}
		}
		out = append(out, b)
	}
	for node := range s.confirmed {
		if !seen[node] {
			delete(s.confirmed, node)
		}
	}
	return out, nil
}

// confirm reads straight from the API server the heartbeats that turned stale since
// the last summary, and says whether one was renewed after all.
func (s *HeartbeatSummarizer) confirm(ctx context.Context, stale map[string]time.Time) bool {
	renewed := false
	for _, node := range s.last.Fresh {
		cached, ok := stale[node]
		if !ok {
			continue
		}
		var l coordinationv1.Lease
		err := s.API.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: beatsummary.HeartbeatName(node)}, &l)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				s.Log.V(1).Info("confirming a stale heartbeat", "node", node, "error", err.Error())
			}
			continue
		}
		if b, ok := beatOf(&l); ok && b.RenewedAt.After(cached) {
			s.confirmed[node] = b.RenewedAt
			renewed = true
		}
	}
	return renewed
}

// write creates or updates the summary's Lease.
func (s *HeartbeatSummarizer) write(ctx context.Context, sum beatsummary.Summary) error {
	if err := s.aggregate().put(ctx, func(l *coordinationv1.Lease) { sum.Apply(l) }); err != nil {
		return err
	}
	s.last, s.wroteAt = sum, s.now()
	return nil
}

func (s *HeartbeatSummarizer) aggregate() *aggregate[*coordinationv1.Lease] {
	if s.summary == nil {
		s.summary = &aggregate[*coordinationv1.Lease]{what: "heartbeat summary", api: s.API, writer: s.Client,
			key:    types.NamespacedName{Namespace: s.Namespace, Name: beatsummary.Name},
			newObj: func() *coordinationv1.Lease { return &coordinationv1.Lease{} }}
	}
	return s.summary
}

// HeartbeatLeases is what a cache of Leases must hold for a HeartbeatSummarizer: the
// speakers' heartbeats in namespace, and no other Lease.
func HeartbeatLeases(namespace string) cache.ByObject {
	return cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}},
		Label: labels.SelectorFromSet(labels.Set{beatsummary.HeartbeatLabel: "true"})}
}

// beatOf reads a speaker's heartbeat.
func beatOf(l *coordinationv1.Lease) (beatsummary.Beat, bool) {
	if l.Labels[beatsummary.HeartbeatLabel] == "" || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return beatsummary.Beat{}, false
	}
	b := beatsummary.Beat{Node: *l.Spec.HolderIdentity}
	if l.Spec.RenewTime != nil {
		b.RenewedAt = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		b.Duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return b, true
}

// earliest returns the earlier of a and b, ignoring a zero one.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
