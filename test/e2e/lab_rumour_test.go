package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testkit"
)

// TestLabDeathRumour: a member back from a partition gossips the deaths it declared
// while it was cut off, and a peer may believe one for a moment, until the accused,
// alive all along, refutes it. A VIP the accused announces must not move for that: the
// peer next in line for it hears the rumour, and from then on only the accused's MAC
// answers for the VIP and no HTTP request to it fails. (Seen in CI: the speaker next
// in line started a takeover on the rumour, waited for the owner to stop answering,
// and published its claim meanwhile; the owner, seeing a later claim standing in for
// it, gave the VIP up, and it stayed with the stand-in.)
func TestLabDeathRumour(t *testing.T) {
	f := fullLabFor(t)
	const accused = "worker3"
	vips := map[string]netip.Addr{}
	_, vips["rumoured"] = f.serviceFirstFor(t, "rumoured", accused)
	believer := f.owner(vips["rumoured"], without(f.nodes, accused)...)
	f.expectOwners(t, vips, "before the rumour")
	ws := f.watchVIPs(t, vips)
	probe := lab.StartHTTPProbe(f.clientNS, "http://"+vips["rumoured"].String()+"/", 20*time.Millisecond, httpProbeTimeout)
	t.Cleanup(probe.Stop)

	source := fmt.Sprintf("rumour-%d", time.Now().UnixNano())
	at := time.Now()
	if err := f.s.SpreadDeathRumour(t.Context(), believer, accused, source); err != nil {
		t.Fatal(err)
	}
	// The premise: the believer took the rumour in. memberlist passes on only a death
	// it believed, and the accused logs its refutation with the rumour's source.
	f.waitRefuted(t, accused, source)
	t.Logf("%s believed the rumour and %s refuted it within %s", believer, accused, sinceFault(time.Now(), at))
	time.Sleep(time.Until(at.Add(afterHeal)))
	end := time.Now()
	time.Sleep(time.Second) // the probe's requests under way at end finish

	f.expectOneAnswer(t, ws, at, at, end, "after the rumour of "+accused+"'s death")
	h, err := f.s.Host(accused)
	if err != nil {
		t.Fatal(err)
	}
	if s := ws[0].arp.Summary(at, end); !slices.Equal(s.MACs, []string{h.MAC}) {
		t.Errorf("from the rumour on, %s was answered by %s; want %s alone (the VIP stays where it is)",
			vips["rumoured"], f.describeMACs(s.MACs), f.describeMACs([]string{h.MAC}))
	}
	f.expectOwners(t, vips, "after the rumour of "+accused+"'s death")
	expectNoHTTPFailure(t, probe, "rumoured", vips["rumoured"], at, end, believer+" heard the rumour of "+accused+"'s death")
}

// TestLabMutualRumour: two peers each believe a rumour of the other's death at once
// (a member back from a cut passes on both deaths it declared), and the third, which
// is the one coming back here, believes one of them too. Each of the two still hears
// a majority without the other, and each publishes a majority without the other; the
// one the third also left out has nobody vouching for it. Neither may go silent for
// that: the VIP one of them announces as a stand-in (no fail-back) stays with it,
// answered by its MAC alone, and no HTTP request to it fails. (Seen in CI, in
// TestLabSpeakerFreeze: both went silent for a moment, their claims went with them,
// and the VIP failed back to the node the hash places it on.)
func TestLabMutualRumour(t *testing.T) {
	f := fullLabFor(t)
	const first = "worker3"
	vips, standIn := f.vipWithStandIn(t, "mutual", first)
	other := without(f.nodes, first, standIn)[0]

	ws := f.watchVIPs(t, vips)
	probe := lab.StartHTTPProbe(f.clientNS, "http://"+vips["mutual"].String()+"/", 20*time.Millisecond, httpProbeTimeout)
	t.Cleanup(probe.Stop)
	source := fmt.Sprintf("rumour-%d", time.Now().UnixNano())
	// The premise: each of the two lost the other to the rumour. (Each refutes the
	// rumour about itself, but may do so on a suspicion it hears first, so its
	// refutation need not name the rumour's source.)
	lostOther, lostStandIn := f.lostCount(t, standIn, other), f.lostCount(t, other, standIn)
	at := time.Now()
	for _, r := range []struct{ to, about string }{{other, standIn}, {first, standIn}, {standIn, other}} {
		if err := f.s.SpreadDeathRumour(t.Context(), r.to, r.about, source); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, labtest.Wait, labtest.Interval, standIn+" and "+other+" each lose the other to the rumours", func() error {
		if n := f.lostCount(t, standIn, other); n == lostOther {
			return fmt.Errorf("%s has not lost %s", standIn, other)
		}
		if n := f.lostCount(t, other, standIn); n == lostStandIn {
			return fmt.Errorf("%s has not lost %s", other, standIn)
		}
		return nil
	})
	t.Logf("%s and %s each believed the other dead within %s", standIn, other, sinceFault(time.Now(), at))
	time.Sleep(time.Until(at.Add(afterHeal)))
	end := time.Now()
	time.Sleep(time.Second) // the probe's requests under way at end finish

	f.expectOneAnswer(t, ws, at, at, end, "after the rumours of "+standIn+"'s and "+other+"'s deaths")
	if s := ws[0].arp.Summary(at, end); !slices.Equal(s.MACs, []string{f.macs[standIn]}) {
		t.Errorf("from the rumours on, %s was answered by %s; want %s alone (the VIP stays with its stand-in)",
			vips["mutual"], f.describeMACs(s.MACs), f.describeMACs([]string{f.macs[standIn]}))
	}
	f.expectOwners(t, vips, "after the rumours", without(f.nodes, first)...)
	expectNoHTTPFailure(t, probe, "mutual", vips["mutual"], at, end, standIn+" and "+other+" believed each other dead")
}

// lostCount is how many times node's speaker has logged losing peer from its
// memberlist view.
func (f *fullLab) lostCount(t *testing.T, node, peer string) int {
	t.Helper()
	log, err := os.ReadFile(f.s.Procs[node+"-speaker"].Log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(log), `"msg":"speaker left memberlist","node":"`+peer+`"`)
}

// waitRefuted waits until accused's speaker logs that it refuted a death rumour
// sent from source: the premise of a rumour test, since memberlist passes on only a
// death it believed and the accused names the rumour's source when it refutes.
func (f *fullLab) waitRefuted(t *testing.T, accused, source string) {
	t.Helper()
	refuted := "Refuting a dead message (from: " + source + ")"
	testkit.Eventually(t, labtest.Wait, labtest.Interval, accused+" refutes the rumour from "+source, func() error {
		log, err := os.ReadFile(f.s.Procs[accused+"-speaker"].Log)
		if err != nil {
			return err
		}
		if !strings.Contains(string(log), refuted) {
			return fmt.Errorf("%s's speaker log has no %q", accused, refuted)
		}
		return nil
	})
}
