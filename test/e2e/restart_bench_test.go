package e2e

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/testkit"
)

// BenchmarkRollingRestart measures what the client sees of a rolling restart of every
// speaker (rollingRestart: SIGTERM, 3 s down, started again, node after node) with a
// short request and a keep-alive request per VIP every 100 ms: failed requests, broken
// keep-alive connections and VIP moves (VIPStatus leader changes), summed over
// svc1..svc3, per trial. Two series in one sitting: "herald" as installed, and
// "restart-hold-0", every speaker run with --restart-hold=0, which hands its VIPs over
// on SIGTERM as herald did before the restart hold. Then "cable-back": the cable of
// svc1's owner out 5 s and back, the same counts from the moment it is plugged back.
// Trials: HERALD_RESTART_TRIALS (default 3). -benchtime=1x.
//
//	go test -count=1 -run '^$' -bench BenchmarkRollingRestart -benchtime=1x -timeout 60m ./test/e2e/
func BenchmarkRollingRestart(b *testing.B) {
	trials := envInt("HERALD_RESTART_TRIALS", 3)
	f := fullLabFor(b)
	vips := maps.Clone(f.vips)
	count := func(b *testing.B, res map[string]restartResult) (failed, broken int) {
		for _, r := range res {
			failed += len(r.shortFailed) + len(r.keptFailed)
			broken += r.dials - 1
		}
		return failed, broken
	}
	moves := func(b *testing.B) int64 {
		var sum int64
		for range 50 {
			status, _, err := f.leaderChanges(b.Context(), vips)
			if err == nil || len(status) == len(vips) {
				for _, v := range status {
					sum += v
				}
				return sum
			}
			time.Sleep(200 * time.Millisecond)
		}
		b.Fatal("no VIPStatus for every VIP")
		return 0
	}
	series := func(b *testing.B, name string) {
		var failed, broken, moved []float64
		for i := range trials {
			f.rebalanceAll(b)
			for n, vip := range vips {
				f.expectOwner(b, vip, f.owner(vip), n+" before the trial")
			}
			before := moves(b)
			res := f.rollingRestart(b, vips)
			fl, br := count(b, res)
			mv := moves(b) - before
			for _, n := range slices.Sorted(maps.Keys(res)) {
				r := res[n]
				for _, p := range append(slices.Clone(r.shortFailed), r.keptFailed...) {
					b.Logf("%s trial %d: %s: a request failed at %s: %v", name, i+1, n, sinceFault(p.Start, r.start), p.Err)
				}
			}
			b.Logf("%s trial %d: %d requests failed, %d keep-alive connections broke, %d VIP moves", name, i+1, fl, br, mv)
			failed, broken, moved = append(failed, float64(fl)), append(broken, float64(br)), append(moved, float64(mv))
		}
		reportTrials(b, name, "failed", failed)
		reportTrials(b, name, "broken", broken)
		reportTrials(b, name, "moves", moved)
	}
	b.Run("herald", func(b *testing.B) {
		for b.Loop() {
			series(b, "herald")
		}
	})
	b.Run("restart-hold-0", func(b *testing.B) {
		args := f.s.SpeakerArgs
		f.restartSpeakers(b, append(slices.Clone(args), "--restart-hold=0"))
		defer f.restartSpeakers(b, args)
		for b.Loop() {
			series(b, "restart-hold-0")
		}
	})
	b.Run("cable-back", func(b *testing.B) {
		for b.Loop() {
			var failed, broken, moved []float64
			for i := range trials {
				f.rebalanceAll(b)
				vip := vips["svc1"]
				owner := f.owner(vip)
				f.expectOwner(b, vip, owner, "svc1 before the trial")
				short := lab.StartHTTPProbe(f.clientNS, "http://"+vip.String()+"/", restartEvery, restartTimeout)
				kept, err := lab.StartKeepAliveProbe(f.clientNS, "http://"+vip.String()+"/", restartEvery, restartTimeout)
				if err != nil {
					b.Fatal(err)
				}
				if err := f.s.LinkDown(b.Context(), owner); err != nil {
					b.Fatal(err)
				}
				f.expectOwner(b, vip, f.owner(vip, without(f.nodes, owner)...), "svc1 with its owner's cable out")
				time.Sleep(5 * time.Second)
				_, dialsOut := kept.Breaks()
				before := moves(b)
				plugged := time.Now()
				if err := f.s.LinkUp(context.Background(), owner); err != nil {
					b.Fatal(err)
				}
				time.Sleep(5 * time.Second)
				end := time.Now()
				time.Sleep(time.Second)
				short.Stop()
				kept.Stop()
				_, sf := short.Between(plugged, end)
				_, kf := kept.Between(plugged, end)
				_, dials := kept.Breaks()
				mv := moves(b) - before
				fl, br := len(sf)+len(kf), dials-dialsOut
				b.Logf("cable-back trial %d: %d requests failed, %d keep-alive connections broke, %d VIP moves after %s's cable came back", i+1, fl, br, mv, owner)
				failed, broken, moved = append(failed, float64(fl)), append(broken, float64(br)), append(moved, float64(mv))
			}
			b.ReportMetric(testkit.Quantile(failed, 0.5), "failed-median")
			b.ReportMetric(testkit.Quantile(broken, 0.5), "broken-median")
			b.ReportMetric(testkit.Quantile(moved, 0.5), "moves-median")
			b.Logf("cable-back: failed max %.0f, broken max %.0f, moves max %.0f (trials %d)", slices.Max(failed), slices.Max(broken), slices.Max(moved), len(failed))
		}
	})
}

// reportTrials reports the median and 95th percentile of one figure of a series of
// trials as benchmark metrics, and logs them with the maximum.
func reportTrials(b *testing.B, series, what string, vs []float64) {
	b.ReportMetric(testkit.Quantile(vs, 0.5), what+"-median")
	b.ReportMetric(testkit.Quantile(vs, 0.95), what+"-p95")
	b.Logf("%s: %s median %.3g p95 %.3g max %.3g (trials %d)", series, what,
		testkit.Quantile(vs, 0.5), testkit.Quantile(vs, 0.95), slices.Max(vs), len(vs))
}
