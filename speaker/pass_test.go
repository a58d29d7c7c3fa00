package speaker

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
	"herald.dev/herald/speaker/members"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/records"
	"herald.dev/herald/speaker/vipstatus"
	"herald.dev/herald/speaker/withhold"
)

// fakeGossip is memberlist as a pass reads it: a snapshot the test sets.
type fakeGossip struct {
	snap      members.Snapshot
	published []byte
}

func (g *fakeGossip) Snapshot() members.Snapshot       { return g.snap }
func (g *fakeGossip) Events() <-chan struct{}          { return nil }
func (g *fakeGossip) LeftGracefully(string) bool       { return false }
func (g *fakeGossip) Release(string)                   {}
func (g *fakeGossip) Publish(state []byte)             { g.published = state }
func (g *fakeGossip) SetMeta([]byte) bool              { return true }
func (g *fakeGossip) Join([]string) (int, error)       { return 0, nil }
func (g *fakeGossip) Sync([]string, time.Duration) int { return 0 }

// live makes nodes the live members, each with the claims it published (none unless
// the test set them): a peer without a state may yet send claims, and a pass waits
// for them.
func (g *fakeGossip) live(nodes ...string) {
	g.snap.Live = nodes
	if g.snap.States == nil {
		g.snap.States = map[string][]byte{}
	}
	for _, n := range nodes {
		if _, ok := g.snap.States[n]; !ok {
			g.snap.States[n] = claims.Set{}.Encode()
		}
	}
}

// lost makes node lost without a goodbye, with its last claims.
func (g *fakeGossip) lost(node string, c claims.Set) {
	g.snap.Lost = map[string][]byte{node: c.Encode()}
	delete(g.snap.States, node)
}

// fakeRecords are the speakers' records as a pass reads them: the API server up, the
// records the test sets, the last wish kept.
type fakeRecords struct {
	recs []quorum.Record
	wish records.Wish
}

func (r *fakeRecords) Status() (bool, time.Time, time.Time) { return true, time.Now(), time.Now() }
func (r *fakeRecords) List(context.Context, []string) ([]quorum.Record, error) {
	return r.recs, nil
}
func (r *fakeRecords) ListAfresh(context.Context, time.Time, []string) ([]quorum.Record, error) {
	return r.recs, nil
}
func (r *fakeRecords) Live(recs []quorum.Record, _ []string, _ time.Time) []quorum.Record {
	return recs
}
func (r *fakeRecords) Decided(quorum.Mode, int, int)      {}
func (r *fakeRecords) Misses([]string, []string) []string { return nil }
func (r *fakeRecords) Want(w records.Wish)                { r.wish = w }
func (r *fakeRecords) Observe(int)                        {}

// fakeAnnouncer keeps the IPs the pass asks to answer for.
type fakeAnnouncer struct {
	mu       sync.Mutex
	answered map[netip.Addr]bool
}

func (a *fakeAnnouncer) Set(_ string, ip netip.Addr, _ []string, _ ...layer2.SetOption) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answered[ip] = true
	return nil
}
func (a *fakeAnnouncer) Withdraw(_ string, ip netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.answered, ip)
}
func (a *fakeAnnouncer) Reannounce(netip.Addr)                       {}
func (a *fakeAnnouncer) Responders() []layer2.ResponderInfo          { return nil }
func (a *fakeAnnouncer) Conflict(netip.Addr) (layer2.Conflict, bool) { return layer2.Conflict{}, false }
func (a *fakeAnnouncer) Ready() bool                                 { return true }
func (a *fakeAnnouncer) Resume()                                     {}
func (a *fakeAnnouncer) answers(ip netip.Addr) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.answered[ip]
}

// passSpeaker is a Speaker of node self with fake memberlist, records and announcer,
// reading a cluster of nodes with one LoadBalancer Service at vip from a fake cache.
func passSpeaker(t *testing.T, self string, nodes []string, vip netip.Addr) (*Speaker, *fakeGossip, *fakeRecords, *fakeAnnouncer) {
	t.Helper()
	objs := []client.Object{
		addressPool("pool", time.Unix(0, 0), "10.0.0.0/24"),
		&heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: "herald-system", Name: "l2"}},
	}
	svc := testkit.LBService("default", "web", testkit.Ingress(vip.String()))
	svc.Spec.Ports = []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}
	objs = append(objs, svc, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		Endpoints:  []discoveryv1.Endpoint{{NodeName: ptr.To(nodes[0]), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	})
	for _, n := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	cfg := DefaultConfig()
	cfg.NodeName = self
	g, r, a := &fakeGossip{}, &fakeRecords{}, &fakeAnnouncer{answered: map[netip.Addr]bool{}}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := newSpeaker(cfg, logr.Discard(), c)
	s.members, s.records, s.l2, s.metrics, s.recorder = g, r, a, m, events.NewFakeRecorder(100)
	s.reports = newReporter(self, c, s.recorder)
	s.vips = vipstatus.NewPublisher(self, c, c, s.log)
	s.withhold = withhold.New(withhold.Config{Self: self}, withhold.Callbacks{
		SetWithheld: func(map[string]bool) {}, LeftGracefully: g.LeftGracefully,
		Event: func(context.Context, string, string, string, string, string) {}, Changed: func() {},
	}, s.log)
	return s, g, r, a
}

// One election pass, driven with fake members, records and announcer: the IP's hash
// node takes it and claims it; the next node takes it over once memberlist lost the
// first, keeps it when the first comes back (no fail-back), and gives it up when a
// majority of records deposes it.
func TestElectionPass(t *testing.T) {
	vip := netip.MustParseAddr("10.0.0.7")
	nodes := []string{"a", "b", "c"}
	order := election.Order(vip, nodes)
	first, second := order[0], order[1]
	ctx := t.Context()

	s1, g1, _, a1 := passSpeaker(t, first, nodes, vip)
	g1.live(nodes...)
	s1.runElection(ctx)
	if !a1.answers(vip) {
		t.Fatalf("%s, the hash's first node for %s, does not answer for it", first, vip)
	}
	if c, err := claims.Decode(g1.published); err != nil || len(c) != 1 {
		t.Errorf("%s published claims %q (%v), want its claim on %s", first, g1.published, err, vip)
	}

	s2, g2, r2, a2 := passSpeaker(t, second, nodes, vip)
	g2.snap.States = map[string][]byte{first: g1.published}
	g2.live(nodes...)
	s2.runElection(ctx)
	if a2.answers(vip) {
		t.Fatalf("%s answers for %s while %s, first in hash order and claiming it, is live", second, vip, first)
	}
	if r2.wish.Mode != quorum.ModeQuorum {
		t.Errorf("record wished in mode %q, want %q", r2.wish.Mode, quorum.ModeQuorum)
	}

	// memberlist lost the first node: the second takes the IP.
	g2.live(slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == first })...)
	g2.lost(first, claims.Set{vip: {}})
	s2.runElection(ctx)
	if !a2.answers(vip) {
		t.Fatalf("%s does not answer for %s after %s was lost", second, vip, first)
	}
	// Its first frames went out (layer2 reports it), which confirms the takeover: the
	// next pass claims the IP.
	s2.announced(layer2.Announcement{IP: vip, At: time.Now()})
	s2.runElection(ctx)
	if c, err := claims.Decode(g2.published); err != nil || len(c) != 1 {
		t.Errorf("%s published claims %q (%v) after its takeover, want its claim on %s", second, g2.published, err, vip)
	}

	// The first node is back, claiming nothing: the IP stays (no fail-back).
	g2.snap.Lost = nil
	g2.snap.States[first] = claims.Set{}.Encode()
	g2.live(nodes...)
	s2.runElection(ctx)
	if !a2.answers(vip) {
		t.Fatalf("%s gave %s back to %s, which came back claiming nothing", second, vip, first)
	}

	// The second node hears nobody, and the others' records publish a majority without
	// it: it is deposed and answers for nothing.
	now := time.Now()
	others := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == second })
	for _, n := range others {
		r2.recs = append(r2.recs, quorum.Record{Node: n, RenewedAt: now, Duration: time.Minute, ChangedAt: now,
			Mode: quorum.ModeQuorum, Members: others})
	}
	g2.live(second)
	s2.runElection(ctx)
	if a2.answers(vip) {
		t.Fatalf("%s still answers for %s, deposed by a majority's records (mode %s)", second, vip, s2.decision.verdict.Mode)
	}
	if !s2.decision.verdict.Mode.Silent() {
		t.Errorf("mode %s, want a silent one", s2.decision.verdict.Mode)
	}
}
