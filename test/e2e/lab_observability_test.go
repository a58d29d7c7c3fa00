package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/test/observability"
)

// TestLabObservability runs a real Prometheus (the Debian package) in the lab with
// herald's alert rules, scraping the controller and every speaker as a cluster's
// PodMonitors would, and checks what the dashboard and the alerts promise:
//   - every metric the dashboard and the alerts use is one the running binaries export;
//   - every dashboard query and alert runs in Prometheus without error;
//   - after a failover the dashboard's leader-change query shows a change for the VIP
//     and its owner query shows the new node;
//   - HeraldVIPMultipleOwners fires while two speakers announce the VIP (the owner's
//     memberlist traffic is dropped, so each side thinks the other is dead) and clears
//     once they see each other again;
//   - HeraldVIPWithoutOwner fires while every node is excluded and clears afterwards;
//   - while a speaker is cut off from memberlist, the quorum panel and
//     HeraldSpeakerSilent name it, and the API-load panels show the records' writes
//     and watch events the partition caused.
//
// The alerts' `for` is cut to a few seconds here; the expressions are the shipped ones.
func TestLabObservability(t *testing.T) {
	f := fullLabFor(t)
	ctx := t.Context()
	root := testenv.RepoRoot()
	dash, err := observability.ReadDashboard(root + "/" + observability.DashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	panels, err := dash.Queries()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := observability.ReadRules(root + "/" + observability.RulesPath)
	if err != nil {
		t.Fatal(err)
	}
	for gi := range groups {
		for ri := range groups[gi].Rules {
			if groups[gi].Rules[ri].For != "" {
				groups[gi].Rules[ri].For = "3s"
			}
		}
	}
	rules, err := observability.RuleFile(groups)
	if err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(panels), observability.RuleQueries(groups)...) // every PromQL herald ships
	prom, err := f.s.StartPrometheus(ctx, rules)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := prom.Stop(); err != nil {
			t.Errorf("stopping the lab's Prometheus: %v", err)
		}
	})
	targets := 1 + len(f.nodes)
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "Prometheus scrapes the controller and every speaker", func() error {
		up, err := prom.Query(ctx, `up == 1`)
		if err != nil {
			return err
		}
		if len(up) != targets {
			return fmt.Errorf("%d of %d targets up: %v", len(up), targets, up)
		}
		return nil
	})

	// A VIP of this test, owned by worker3 (which runs no pod) and next taking over.
	_, vip := f.serviceFirstFor(t, "observed", "worker3")
	next := f.owner(vip, without(f.nodes, "worker3")...)
	f.expectOwner(t, vip, "worker3", "before the failover")

	t.Run("metric names are the binaries' own", func(t *testing.T) {
		exported := map[string]string{} // name → type, from the live endpoints
		for _, host := range append([]string{lab.CPHost}, f.nodes...) {
			text, err := f.s.Scrape(ctx, host)
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(text) {
				if fs := strings.Fields(line); len(fs) == 4 && fs[0] == "#" && fs[1] == "TYPE" {
					exported[fs[2]] = fs[3]
				}
			}
		}
		for _, q := range all {
			for _, name := range observability.MetricNames(q.Expr) {
				// Series labelled with what only a fault tells (the peer a speaker
				// cannot hear, a foreign MAC, a dead node) exist only during one: the
				// partition and conflict subtests below see the first two, and
				// TestLabNodeDeath the third.
				if name == "herald_memberlist_unreachable" || name == "herald_l2_conflict" || name == "herald_proxy_endpoints_withheld" {
					continue
				}
				if !isExported(exported, name) {
					t.Errorf("%s uses %s, which no herald binary in the lab exports", q.Where, name)
				}
			}
		}
		if len(exported) == 0 || !isExported(exported, "herald_l2_owner") {
			t.Fatalf("the scrapes hold no herald metric: %v", exported)
		}
	})

	dashboardQuery := func(title string) string {
		for _, p := range dash.Panels {
			if p.Title == title && len(p.Targets) > 0 {
				expr, err := observability.WithVIP(p.Targets[0].Expr, vip.String())
				if err != nil {
					t.Fatal(err)
				}
				return expr
			}
		}
		t.Fatalf("the dashboard has no panel %q", title)
		return ""
	}
	ownersQuery := dashboardQuery("Current owners")
	changesQuery := dashboardQuery("Leader changes per VIP")
	ownersAre := func(want ...string) func() error {
		return func() error {
			s, err := prom.Query(ctx, ownersQuery)
			if err != nil {
				return err
			}
			var got []string
			for _, x := range s {
				got = append(got, x.Labels["node"])
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("%s gives owners %v, want %v", ownersQuery, got, want)
			}
			return nil
		}
	}
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "the owner panel shows worker3", ownersAre("worker3"))

	t.Run("failover", func(t *testing.T) {
		res, err := f.s.MeasureFailover(ctx, vip, lab.FaultKill)
		defer func() {
			if err := f.s.StartSpeaker(context.Background(), "worker3"); err != nil {
				t.Errorf("starting worker3's speaker again: %v", err)
			}
			// worker3 takes nothing back (no fail-back) until a rebalance.
			f.expectOwner(t, vip, next, "after worker3's speaker came back")
			f.rebalance(t, "observed")
			f.expectOwner(t, vip, "worker3", "after worker3's speaker came back and a rebalance")
		}()
		if err != nil {
			t.Fatal(err)
		}
		if res.NewOwner != next {
			t.Fatalf("the VIP went to %s, want %s", res.NewOwner, next)
		}
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "the owner panel shows "+next, ownersAre(next))
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "the leader-change panel shows a change of "+vip.String(), func() error {
			s, err := prom.Query(ctx, changesQuery)
			if err != nil {
				return err
			}
			for _, x := range s {
				if x.Labels["ip"] == vip.String() && x.Value > 0 {
					return nil
				}
			}
			return fmt.Errorf("%s gives %v, want a value > 0 for ip %s", changesQuery, s, vip)
		})
	})
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "the owner panel shows worker3 again", ownersAre("worker3"))

	t.Run("every query runs", func(t *testing.T) {
		for _, q := range all {
			expr, err := observability.ForPrometheus(q.Expr)
			if err != nil {
				t.Errorf("%s: %v", q.Where, err)
				continue
			}
			if _, err := prom.Query(ctx, expr); err != nil {
				t.Errorf("%s: %v", q.Where, err)
			}
		}
	})

	t.Run("memberlist partition", func(t *testing.T) {
		cut := time.Now()
		heal := inflict(t, func(ctx context.Context) error { return f.s.PartitionMemberlist(ctx, "worker3") },
			func(ctx context.Context) error { return f.s.HealMemberlist(ctx, "worker3") })
		// worker3, cut off, goes silent; the majority serves its VIP.
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "only "+next+" announces "+vip.String(), ownersAre(next))
		partitioned := `ALERTS{alertname="HeraldMemberlistPartitioned", alertstate="firing", node="worker3"}`
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "HeraldMemberlistPartitioned fires for worker3", func() error {
			s, err := prom.Query(ctx, partitioned)
			if err != nil {
				return err
			}
			var peers []string
			for _, x := range s {
				peers = append(peers, x.Labels["peer"])
			}
			slices.Sort(peers)
			if want := without(f.nodes, "worker3"); !slices.Equal(peers, want) {
				return fmt.Errorf("%s names peers %v, want %v", partitioned, peers, want)
			}
			return nil
		})
		// The quorum panels and HeraldSpeakerSilent name worker3, silent in Minority.
		worker3InMinority := func(expr string) func() error {
			return func() error {
				s, err := prom.Query(ctx, expr)
				if err != nil {
					return err
				}
				if len(s) != 1 || s[0].Labels["instance"] != "worker3" || s[0].Labels["mode"] != "Minority" {
					return fmt.Errorf("%s gives %v, want worker3 in Minority alone", expr, s)
				}
				return nil
			}
		}
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "the panel of speakers not in Quorum shows worker3 in Minority",
			worker3InMinority(dashboardQuery("Speakers not in Quorum")))
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "HeraldSpeakerSilent fires for worker3",
			worker3InMinority(`ALERTS{alertname="HeraldSpeakerSilent", alertstate="firing"}`))
		// From 2 s after the cut on, no two speakers exported themselves as owner,
		// and the multiple-owners alert never went pending.
		window := time.Since(cut) - 2*time.Second
		owners := fmt.Sprintf(`max_over_time((sum by (ip) (herald_l2_owner{ip=%q}))[%ds:1s])`, vip, int(window.Seconds()))
		if s, err := prom.Query(ctx, owners); err != nil {
			t.Error(err)
		} else if len(s) != 1 || s[0].Value != 1 {
			t.Errorf("%s gives %v, want 1: two speakers announced %s during the partition", owners, s, vip)
		}
		if s, err := prom.Query(ctx, fmt.Sprintf(`ALERTS{alertname="HeraldVIPMultipleOwners", ip=%q}`, vip)); err != nil {
			t.Error(err)
		} else if len(s) > 0 {
			t.Errorf("HeraldVIPMultipleOwners is %v during a memberlist partition", s)
		}
		heal()
		f.expectOwner(t, vip, next, "after the partition healed (no fail-back)")
		f.rebalance(t, "observed")
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "worker3 owns "+vip.String()+" again after a rebalance", ownersAre("worker3"))
		for _, alert := range []string{"HeraldMemberlistPartitioned", "HeraldSpeakerSilent"} {
			testkit.Eventually(t, labtest.Wait, labtest.Interval, alert+" clears", func() error {
				s, err := prom.Query(ctx, fmt.Sprintf(`ALERTS{alertname=%q}`, alert))
				if err != nil {
					return err
				}
				if len(s) > 0 {
					return fmt.Errorf("still %v", s)
				}
				return nil
			})
		}
		// The partition made the speakers write their records (worker3's mode, the
		// others' view) and their watches bring those writes: the API-load panels
		// show both.
		for _, title := range []string{"Speaker record writes by reason", "Record watch events received by the speakers"} {
			i := slices.IndexFunc(dash.Panels, func(p observability.Panel) bool { return p.Title == title && len(p.Targets) > 0 })
			if i < 0 {
				t.Fatalf("the dashboard has no panel %q", title)
			}
			// Over the whole partition rather than Grafana's rate interval.
			expr, err := observability.ForPrometheus(strings.ReplaceAll(dash.Panels[i].Targets[0].Expr, "$__rate_interval", "10m"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := prom.Query(ctx, expr)
			if err != nil {
				t.Error(err)
			} else if len(s) == 0 || !slices.ContainsFunc(s, func(x lab.Sample) bool { return x.Value > 0 }) {
				t.Errorf("panel %q: %s gives %v after a partition, want a rate above 0", title, expr, s)
			}
		}
	})

	t.Run("no owner", func(t *testing.T) {
		for _, n := range f.nodes {
			f.setNodeLabel(t, n, election.ExcludeLabel, ptrTo(""))
		}
		unlabelled := false
		unlabel := func() {
			if !unlabelled {
				unlabelled = true
				// worker3, the hash's choice, first: the first node eligible takes the
				// VIP and keeps it when nodes the hash prefers become eligible later
				// (no fail-back), so the order of the removals picks the owner.
				for _, n := range slices.Backward(f.nodes) {
					f.setNodeLabel(t, n, election.ExcludeLabel, nil)
				}
			}
		}
		defer unlabel()
		f.expectSilence(t, vip, "every node excluded")
		f.waitAlert(t, prom, "HeraldVIPWithoutOwner", vip.String(), true)
		unlabel()
		f.expectOwner(t, vip, "worker3", "after the exclusion labels were removed")
		f.waitAlert(t, prom, "HeraldVIPWithoutOwner", vip.String(), false)
	})

	// A device that is no speaker (the client, given the VIP by hand) announces the
	// VIP: worker3 yields, the conflict alert names the device's MAC, and the
	// multiple-owners alert, which is about speakers, stays silent.
	t.Run("address conflict", func(t *testing.T) {
		cl, err := f.s.Host(lab.ClientHost)
		if err != nil {
			t.Fatal(err)
		}
		// The partition's heal may end with a speaker seeing another's gratuitous ARP
		// for a moment (a peer claim); the multiple-owners alert counts claims over
		// 30 s and fires 30 s later. Start once that is over, so that the check below
		// is about the foreign device alone.
		f.waitAlert(t, prom, "HeraldVIPMultipleOwners", vip.String(), false)
		heal := inflict(t, func(ctx context.Context) error {
			if out, err := f.s.Exec(ctx, lab.ClientHost, "ip", "addr", "add", vip.String()+"/32", "dev", "eth0"); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			// Debian's arping exits non-zero when nothing answers a gratuitous ARP.
			_, _ = f.s.Exec(ctx, lab.ClientHost, "arping", "-U", "-c", "2", "-i", "eth0", "-S", vip.String(), vip.String())
			return nil
		}, func(ctx context.Context) error {
			out, err := f.s.Exec(ctx, lab.ClientHost, "ip", "addr", "del", vip.String()+"/32", "dev", "eth0")
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})
		conflict := fmt.Sprintf(`ALERTS{alertname="HeraldIPConflict", alertstate="firing", ip=%q, mac=%q}`, vip, cl.MAC)
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "HeraldIPConflict fires for "+vip.String()+" and "+cl.MAC, func() error {
			s, err := prom.Query(ctx, conflict)
			if err != nil {
				return err
			}
			if len(s) != 1 {
				return fmt.Errorf("%s gives %v", conflict, s)
			}
			return nil
		})
		// worker3 stays the elected owner (it yields the IP, it does not give it to
		// another node): the owner panel goes on showing it.
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "the owner panel still shows worker3", ownersAre("worker3"))
		if s, err := prom.Query(ctx, fmt.Sprintf(`ALERTS{alertname="HeraldVIPMultipleOwners", ip=%q}`, vip)); err != nil {
			t.Error(err)
		} else if len(s) > 0 {
			t.Errorf("HeraldVIPMultipleOwners is %v for a foreign device", s)
		}
		heal()
		// worker3 probes again every --gratuitous-refresh (60 s) and takes the IP back.
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "HeraldIPConflict clears", func() error {
			s, err := prom.Query(ctx, `ALERTS{alertname="HeraldIPConflict"}`)
			if err != nil {
				return err
			}
			if len(s) > 0 {
				return fmt.Errorf("still %v", s)
			}
			return nil
		})
		f.expectOwner(t, vip, "worker3", "after the device gave the VIP back")
	})
}

func sorted(s ...string) []string { slices.Sort(s); return s }

// isExported says whether name is a metric family of exported or a series of one of
// its histograms or summaries (_bucket, _sum, _count).
func isExported(exported map[string]string, name string) bool {
	if _, ok := exported[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if typ := exported[base]; typ == "histogram" || (typ == "summary" && suffix != "_bucket") {
				return true
			}
		}
	}
	return false
}

// waitAlert waits until alert is firing for ip (firing) or no longer pending or firing
// for it (!firing).
func (f *fullLab) waitAlert(t *testing.T, prom *lab.Prometheus, alert, ip string, firing bool) {
	t.Helper()
	expr := fmt.Sprintf(`ALERTS{alertname=%q, ip=%q}`, alert, ip)
	what := fmt.Sprintf("%s fires for %s", alert, ip)
	if !firing {
		what = fmt.Sprintf("%s clears for %s", alert, ip)
	}
	testkit.Eventually(t, labtest.Wait, labtest.Interval, what, func() error {
		s, err := prom.Query(t.Context(), expr)
		if err != nil {
			return err
		}
		on := slices.ContainsFunc(s, func(x lab.Sample) bool { return x.Labels["alertstate"] == "firing" })
		if firing == on && (firing || len(s) == 0) {
			return nil
		}
		return fmt.Errorf("%s gives %v", expr, s)
	})
}
