package e2e

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
)

const (
	// restartDown is how long each speaker stays stopped, as a DaemonSet rolling
	// update's new pod takes a few seconds to start.
	restartDown = 3 * time.Second
	// restartEvery is the pace of each client: a short request, and a request on the
	// keep-alive connection, per VIP.
	restartEvery = 100 * time.Millisecond
	// restartTimeout bounds each request, as curl -m 0.5.
	restartTimeout = 500 * time.Millisecond
	// restartHold is the speakers' --restart-hold in the lab (the default).
	restartHold = 10 * time.Second
)

// TestLabNewServiceDuringRestart creates a Service while the speaker its VIP's hash
// puts first is restarting. Its peers hold that speaker's VIPs, not this new one: the
// next node answers for it before the restarting speaker is back (before the hold
// would have ended), and keeps it when it is back.
func TestLabNewServiceDuringRestart(t *testing.T) {
	f := fullLabFor(t)
	n := f.nodes[len(f.nodes)-1]
	vip := f.freeIPFirstFor(t, n)
	next := election.Order(vip, without(f.nodes, n))[0]
	if err := f.s.StopSpeaker(n); err != nil {
		t.Fatalf("stopping the speaker of %s: %v", n, err)
	}
	stopped := time.Now()
	back := false
	defer func() {
		if !back {
			if err := f.s.StartSpeaker(context.Background(), n); err != nil {
				t.Errorf("starting the speaker of %s again: %v", n, err)
			}
		}
	}()
	svc := f.createService(t, testkit.LBService("default", "during-restart",
		webpods, testkit.Annotated(heraldv1.AnnotationLoadBalancerIPs, vip.String())))
	defer f.deleteService(t, svc.Name)
	if got := f.waitIP(t, svc.Name); got != vip {
		t.Fatalf("Service %s asked for %s and got %s", svc.Name, vip, got)
	}
	f.expectOwner(t, vip, next, "while the speaker of "+n+" restarts")
	answered := time.Since(stopped)
	t.Logf("%s answered by %s %v after the speaker of %s stopped", vip, next, answered.Round(time.Millisecond), n)
	if answered >= restartHold {
		t.Errorf("%s was answered only %v after the speaker of %s stopped, when the hold (%v) had ended: "+
			"the restarting node was elected for a VIP it never announced", vip, answered.Round(time.Millisecond), n, restartHold)
	}
	if err := f.s.StartSpeaker(t.Context(), n); err != nil {
		t.Fatalf("starting the speaker of %s again: %v", n, err)
	}
	back = true
	time.Sleep(2 * time.Second) // the speaker rejoins and reads its claims back
	f.expectOwner(t, vip, next, "after the speaker of "+n+" is back (no fail-back)")
}

// TestLabRollingRestart stops every speaker with SIGTERM, one node after the other as
// a DaemonSet rolling update does, each down for restartDown, while the client sends
// each VIP a short request and a request on one keep-alive connection every 100 ms. No
// request may fail, no keep-alive connection may break, no VIP may change owner: the
// peers hold a restarting speaker's VIPs for it, the node's rules and conntrack keep
// serving them, and the new speaker takes them back.
func TestLabRollingRestart(t *testing.T) {
	f := fullLabFor(t)
	vips := maps.Clone(f.vips)
	f.expectOwners(t, vips, "before the rolling restart")
	var statusBefore map[string]int64
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "every VIPStatus names the VIP's owner", func() (err error) {
		statusBefore, _, err = f.leaderChanges(t.Context(), vips)
		return err
	})
	expectNothingBroke(t, vips, f.rollingRestart(t, vips))
	f.expectOwners(t, vips, "after the rolling restart")
	// The VIPStatus counts moves across restarts (the speakers' counters restart with
	// them, as Prometheus counters do).
	status, _, err := f.leaderChanges(t.Context(), vips)
	if err != nil {
		t.Fatal(err)
	}
	for name := range vips {
		if status[name] != statusBefore[name] {
			t.Errorf("%s: VIPStatus leader changes went from %d to %d, want no change", name, statusBefore[name], status[name])
		}
	}
}

// TestLabRollingRestartAwayFromHome is TestLabRollingRestart after two failovers
// have moved VIPs away from the nodes the hash places them on: a cable pulled for
// restartDown and plugged back, twice. With no fail-back, those VIPs stay with the
// nodes that took them over; a rolling restart of every speaker must not move them
// back either (no failed request, no broken connection, no owner changed).
func TestLabRollingRestartAwayFromHome(t *testing.T) {
	f := fullLabFor(t)
	vips := maps.Clone(f.vips)
	f.expectOwners(t, vips, "before the failovers")
	owners := f.awayFromHome(t, vips)
	expectNothingBroke(t, vips, f.rollingRestart(t, vips))
	for _, name := range slices.Sorted(maps.Keys(vips)) {
		f.expectOwner(t, vips[name], owners[name], name+" after the rolling restart")
	}
}

// TestLabKillEverySpeakerAwayFromHome kills every speaker at once (SIGKILL: no word to
// anyone, no claims written on the way out) after two failovers moved VIPs off their
// hash nodes, and starts them again a second later. Each takes back the claims it last
// saved and touched: no failed request, no broken connection, no owner changed.
func TestLabKillEverySpeakerAwayFromHome(t *testing.T) {
	f := fullLabFor(t)
	vips := maps.Clone(f.vips)
	f.expectOwners(t, vips, "before the failovers")
	owners := f.awayFromHome(t, vips)
	f.killEverySpeaker(t, vips, owners, "")
}

// TestLabKillEverySpeakerOneJoinsLate is TestLabKillEverySpeakerAwayFromHome where the
// node announcing the most VIPs reaches its peers joinLate after the others: its
// memberlist refuses connections until then, as a host whose speaker is slower to
// start would. The others hear each other, a majority, at once, and read its record
// (Restarting) before they hear it; they must wait for it rather than take its IPs.
// In a lab of its own whose speakers retry joins every 200 ms (2 s by default, which
// would make the late one wait for the next round).
func TestLabKillEverySpeakerOneJoinsLate(t *testing.T) {
	cfg := lab.Config{Workers: 3, SpeakerArgs: []string{"--ml-join-interval=200ms"}}
	f := ownLab(t, restartPrefix, "lab", cfg, true)
	vips := maps.Clone(f.vips)
	f.expectOwners(t, vips, "before the failovers")
	owners := f.awayFromHome(t, vips)
	f.killEverySpeaker(t, vips, owners, busiest(owners))
}

// restartPrefix names the namespaces of TestLabKillEverySpeakerOneJoinsLate's lab.
const restartPrefix = "hk-"

// joinLate is how long the late speaker's memberlist refuses its peers after the
// start: under --quorum-grace (1 s), after which it would arbitrate alone, and well
// under --quorum-join-wait (2 s), the longest its peers wait to hear it.
const joinLate = 400 * time.Millisecond

// killEverySpeaker kills every speaker at once, starts them again a second later
// (late, unless "", refusing memberlist for joinLate from then) and expects nothing
// broken and every VIP still with its owner in owners.
func (f *fullLab) killEverySpeaker(t *testing.T, vips map[string]netip.Addr, owners map[string]string, late string) {
	t.Helper()
	if late != "" {
		t.Logf("%s, announcing the most VIPs, reaches its peers %v after the others", late, joinLate)
	}
	expectNothingBroke(t, vips, f.probed(t, vips, func() {
		for _, n := range f.nodes {
			if err := f.s.KillSpeaker(n); err != nil {
				t.Fatalf("killing the speaker of %s: %v", n, err)
			}
		}
		healed := make(chan error, 1)
		if late != "" {
			if err := f.s.RefuseMemberlist(t.Context(), late); err != nil {
				t.Fatalf("refusing the memberlist of %s: %v", late, err)
			}
		}
		time.Sleep(time.Second)
		if late != "" {
			time.AfterFunc(joinLate, func() { healed <- f.s.HealMemberlist(context.Background(), late) })
		} else {
			healed <- nil
		}
		if err := f.s.StartSpeakers(t.Context(), f.nodes...); err != nil {
			t.Fatalf("starting every speaker again: %v", err)
		}
		if err := <-healed; err != nil {
			t.Fatalf("healing the memberlist of %s: %v", late, err)
		}
		time.Sleep(3 * time.Second) // they rejoin and elect
	}))
	for _, name := range slices.Sorted(maps.Keys(vips)) {
		f.expectOwner(t, vips[name], owners[name], name+" after every speaker was killed and started again")
	}
}

// busiest returns the node that owns the most of owners' VIPs (the first by name on
// a tie).
func busiest(owners map[string]string) string {
	count := map[string]int{}
	for _, o := range owners {
		count[o]++
	}
	best := ""
	for _, n := range slices.Sorted(maps.Keys(count)) {
		if best == "" || count[n] > count[best] {
			best = n
		}
	}
	return best
}

// awayFromHome moves two VIPs off the nodes the hash places them on, as failovers do:
// the cable of a VIP's hash node pulled until the VIP moved, then plugged back (no
// fail-back), twice. It returns the owners then.
func (f *fullLab) awayFromHome(t *testing.T, vips map[string]netip.Addr) map[string]string {
	t.Helper()
	owners := f.owners(t, vips)
	for range 2 {
		// Pull the cable of a VIP's hash node that owns no VIP away from its own, so
		// that the VIPs already away stay away.
		holders := map[string]bool{}
		for name, o := range owners {
			if o != f.owner(vips[name]) {
				holders[o] = true
			}
		}
		name := ""
		for _, n := range slices.Sorted(maps.Keys(vips)) {
			if home := f.owner(vips[n]); owners[n] == home && !holders[home] {
				name = n
				break
			}
		}
		if name == "" {
			break
		}
		home := f.owner(vips[name])
		if err := f.s.LinkDown(t.Context(), home); err != nil {
			t.Fatalf("pulling %s's cable: %v", home, err)
		}
		f.expectOwner(t, vips[name], f.owner(vips[name], without(f.nodes, home)...), name+" while "+home+"'s cable is out")
		if err := f.s.LinkUp(t.Context(), home); err != nil {
			t.Fatalf("plugging %s's cable back in: %v", home, err)
		}
		f.waitAllInQuorum(t)
		owners = f.owners(t, vips)
	}
	away := 0
	for _, name := range slices.Sorted(maps.Keys(vips)) {
		if owners[name] != f.owner(vips[name]) {
			away++
		}
		t.Logf("%s (%s): owned by %s, the hash's node is %s", name, vips[name], owners[name], f.owner(vips[name]))
	}
	if away < 2 {
		t.Fatalf("%d VIPs are away from the nodes the hash places them on after the failovers, want 2", away)
	}
	return owners
}

// owners returns the node answering ARP for each VIP from the client, once one alone
// has answered over a whole ownerWindow.
func (f *fullLab) owners(t *testing.T, vips map[string]netip.Addr) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(vips)) {
		out[name] = f.hostOfMAC(f.settledOwner(t, vips[name], name))
	}
	return out
}

// expectNothingBroke fails the test for every short request that failed, every
// keep-alive connection that broke and every second connection dialled during a
// rolling restart.
func expectNothingBroke(t *testing.T, vips map[string]netip.Addr, res map[string]restartResult) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(vips)) {
		r := res[name]
		t.Logf("%s (%s): short requests %d, failed %d; keep-alive requests %d, failed %d, connections dialled %d",
			name, vips[name], r.short, len(r.shortFailed), r.kept, len(r.keptFailed), r.dials)
		if r.short == 0 || r.kept == 0 {
			t.Errorf("%s: no request measured during the rolling restart", name)
		}
		for i, fl := range r.shortFailed {
			if i == 5 {
				t.Errorf("%s: ... and %d more short requests failed", name, len(r.shortFailed)-5)
				break
			}
			t.Errorf("%s (%s): a short request failed at %s: %v", name, vips[name], sinceFault(fl.Start, r.start), fl.Err)
		}
		for _, b := range r.breaks {
			t.Errorf("%s (%s): the keep-alive connection broke at %s: %v", name, vips[name], sinceFault(b.Start, r.start), b.Err)
		}
		if r.dials != r.conns {
			t.Errorf("%s: the keep-alive clients dialled %d connections, want %d", name, r.dials, r.conns)
		}
	}
}

// restartResult is what the client saw of one VIP during a rolling restart.
type restartResult struct {
	start       time.Time
	short, kept int
	shortFailed []lab.ProbeFailure
	keptFailed  []lab.ProbeFailure
	breaks      []lab.ProbeFailure
	// conns keep-alive clients dialled dials connections in all.
	conns, dials int
}

// rollingRestart restarts every speaker (SIGTERM, restartDown down, started again,
// node after node) while the client sends each VIP a short request and a request on a
// keep-alive connection every restartEvery, and returns what it saw, by Service.
func (f *fullLab) rollingRestart(tb testing.TB, vips map[string]netip.Addr) map[string]restartResult {
	tb.Helper()
	return f.probed(tb, vips, func() {
		for _, n := range f.nodes {
			stopped := time.Now()
			if err := f.s.StopSpeaker(n); err != nil {
				tb.Fatalf("stopping the speaker of %s: %v", n, err)
			}
			time.Sleep(time.Until(stopped.Add(restartDown)))
			if err := f.s.StartSpeaker(tb.Context(), n); err != nil {
				tb.Fatalf("starting the speaker of %s again: %v", n, err)
			}
			tb.Logf("speaker of %s stopped and back in %v", n, time.Since(stopped).Round(time.Millisecond))
			time.Sleep(time.Second) // the DaemonSet waits for the pod to be ready, then some
		}
	})
}

// probed runs act while the client sends each VIP a short request and a request on a
// keep-alive connection every restartEvery, and returns what it saw, by Service.
func (f *fullLab) probed(tb testing.TB, vips map[string]netip.Addr, act func()) map[string]restartResult {
	tb.Helper()
	return f.probedConns(tb, vips, 1, act)
}

// probedConns is probed with conns keep-alive connections per VIP.
func (f *fullLab) probedConns(tb testing.TB, vips map[string]netip.Addr, conns int, act func()) map[string]restartResult {
	tb.Helper()
	short := map[string]*lab.HTTPProbe{}
	kept := map[string][]*lab.KeepAliveProbe{}
	for name, vip := range vips {
		url := lab.VIPURL(vip)
		p := lab.StartHTTPProbe(f.clientNS, url, restartEvery, restartTimeout)
		defer p.Stop()
		short[name] = p
		for range conns {
			k, err := lab.StartKeepAliveProbe(f.clientNS, url, restartEvery, restartTimeout)
			if err != nil {
				tb.Fatal(err)
			}
			defer k.Stop()
			kept[name] = append(kept[name], k)
		}
	}
	time.Sleep(time.Second) // every probe is under way
	start := time.Now()
	act()
	end := time.Now()
	time.Sleep(time.Second) // the requests under way at end finish
	out := map[string]restartResult{}
	for name := range vips {
		r := restartResult{start: start, conns: conns}
		r.short, r.shortFailed = short[name].Between(start, end)
		for _, k := range kept[name] {
			n, failed := k.Between(start, end)
			breaks, dials := k.Breaks()
			r.kept, r.keptFailed = r.kept+n, append(r.keptFailed, failed...)
			r.breaks, r.dials = append(r.breaks, breaks...), r.dials+dials
		}
		out[name] = r
	}
	return out
}
