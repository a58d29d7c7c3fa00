package e2e

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/speaker/election"
)

// BenchmarkPlannedMove measures what the client sees of a planned move: the owner of
// svc1's VIP labelled node.kubernetes.io/exclude-from-external-load-balancers (a
// trigger herald has always obeyed, so the same benchmark runs on older trees) while
// the client sends a short request and a request on each of five keep-alive
// connections every 100 ms. Per trial: failed requests (short and keep-alive), broken
// keep-alive connections, and the flows the new owner forwarded to the old one (its
// handover table, 0 without one), and, from the client's ARP requests every 10 ms,
// when the new owner first answered and how long after the old owner's last answer
// (negative: both answered). The label is removed after each trial and the VIP
// rebalanced home. Two series in one sitting: "herald" as installed, and
// "handover-drain-0", every speaker run with --handover-drain=0 (no forwarding).
// Trials: HERALD_MOVE_TRIALS (default 10). -benchtime=1x.
//
//	go test -count=1 -run '^$' -bench BenchmarkPlannedMove -benchtime=1x -timeout 60m ./test/e2e/
func BenchmarkPlannedMove(b *testing.B) {
	trials := envInt("HERALD_MOVE_TRIALS", 10)
	f := fullLabFor(b)
	series := func(b *testing.B, name string) {
		var failed, broken, flows, moved, silent []float64
		for i := range trials {
			f.rebalanceAll(b)
			vip := f.vips["svc1"]
			old := f.owner(vip)
			next := f.owner(vip, without(f.nodes, old)...)
			f.expectOwner(b, vip, old, "svc1 before the trial")
			one := map[string]netip.Addr{"svc1": vip}
			var forwarded int
			var t0 time.Time
			arp := labtest.WatchARP(b, f.clientNS, vip, 10*time.Millisecond)
			res := f.probedConns(b, one, handoverConns, func() {
				t0 = time.Now()
				f.setNodeLabel(b, old, election.ExcludeLabel, ptrTo(""))
				f.expectOwner(b, vip, next, "svc1 with "+old+" excluded")
				forwarded = f.forwardedFlows(b, next, vip)
			})
			arp.Close()
			f.setNodeLabel(b, old, election.ExcludeLabel, nil)
			// The move as the client's ARP requests, every 10 ms, saw it: the new owner's
			// first answer, and the silence since the old owner's last (negative: both
			// answered for a while).
			first, ok := arp.FirstFrom(f.macs[next], t0)
			last, answered := arp.LastFrom(f.macs[old], t0)
			if !answered {
				last = t0
			}
			if !ok {
				b.Fatalf("trial %d: %s never answered ARP for %s", i+1, next, vip)
			}
			r := res["svc1"]
			fl, br := len(r.shortFailed)+len(r.keptFailed), r.dials-r.conns
			b.Logf("%s trial %d: %s to %s: new owner answering ARP %.0f ms after the label (%.0f ms after the old owner's last answer); %d requests failed, %d of %d keep-alive connections broke, %d flows forwarded",
				name, i+1, old, next, ms(first.Sub(t0)), ms(first.Sub(last)), fl, br, r.conns, forwarded)
			failed, broken, flows = append(failed, float64(fl)), append(broken, float64(br)), append(flows, float64(forwarded))
			moved, silent = append(moved, ms(first.Sub(t0))), append(silent, ms(first.Sub(last)))
		}
		reportTrials(b, name, "failed", failed)
		reportTrials(b, name, "broken", broken)
		reportTrials(b, name, "flows", flows)
		reportTrials(b, name, "move-ms", moved)
		reportTrials(b, name, "silence-ms", silent)
	}
	b.Run("herald", func(b *testing.B) {
		for b.Loop() {
			series(b, "herald")
		}
	})
	b.Run("handover-drain-0", func(b *testing.B) {
		args := f.s.SpeakerArgs
		f.restartSpeakers(b, append(slices.Clone(args), "--handover-drain=0"))
		defer f.restartSpeakers(b, args)
		for b.Loop() {
			series(b, "handover-drain-0")
		}
	})
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// forwardedFlows counts the flows of vip in node's handover table (0 without one).
func (f *fullLab) forwardedFlows(tb testing.TB, node string, vip netip.Addr) int {
	table, err := f.handoverTable(tb, node, vip)
	if err != nil {
		return 0
	}
	return flowsOf(table, vip)
}

// handoverTable lists node's handover table of vip's family (nft's text).
func (f *fullLab) handoverTable(tb testing.TB, node string, vip netip.Addr) (string, error) {
	family := "ip"
	if vip.Is6() {
		family = "ip6"
	}
	out, err := f.s.Exec(tb.Context(), node, "nft", "list", "table", family, "herald-handover")
	return string(out), err
}

// flowsOf counts the flows to vip in a listing of a handover table: the elements of
// its set, source . port . vip . port.
func flowsOf(table string, vip netip.Addr) int {
	return strings.Count(table, " . "+vip.String()+" . ")
}
