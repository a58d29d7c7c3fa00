package e2e

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/testkit"
)

// TestLabMemberlistKeyRotation rotates the speakers' memberlist key with `herald
// memberlist-key rotate` (add a key, make it primary, remove the old one, each step
// applied by every speaker before the next) while the client sends each VIP a
// request every 100 ms and asks ARP for it every 20 ms. No request fails, no VIP
// changes owner (VIPStatus and herald_l2_leader_changes_total), exactly one MAC, the
// owner's, answers for each VIP throughout, and at the end the old key is gone from
// the Secret and from every speaker.
func TestLabMemberlistKeyRotation(t *testing.T) {
	f := fullLabFor(t)
	vips := maps.Clone(f.vips)
	f.expectOwners(t, vips, "before the rotation")
	var statusBefore, metricBefore map[string]int64
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "every VIPStatus names the VIP's owner", func() (err error) {
		statusBefore, metricBefore, err = f.leaderChanges(t.Context(), vips)
		return err
	})
	before := memberlistSecret()
	f.getObject(t, before)
	oldRing, err := memberkey.KeyringFromSecretData(before.Data)
	if err != nil {
		t.Fatal(err)
	}

	probes := map[string]*lab.HTTPProbe{}
	watches := map[string]*lab.ARPWatch{}
	for name, vip := range vips {
		p := lab.StartHTTPProbe(f.clientNS, "http://"+vip.String()+"/", restartEvery, restartTimeout)
		defer p.Stop()
		probes[name] = p
		watches[name] = labtest.WatchARP(t, f.clientNS, vip, 20*time.Millisecond)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := f.s.Exec(ctx, lab.CPHost, f.s.Herald, "memberlist-key", "rotate", "--kubeconfig", f.s.Kubeconfig, "--wait", "3m")
	t.Logf("herald memberlist-key rotate (%v):\n%s", time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("rotate: %v", err)
	}
	// A speaker cut off by the rotation would be declared dead within a second.
	time.Sleep(2 * time.Second)
	end := time.Now()

	for _, name := range slices.Sorted(maps.Keys(vips)) {
		vip := vips[name]
		expectNoHTTPFailure(t, probes[name], name, vip, start, end, "the rotation began")
		want := f.macs[f.owner(vip)]
		if macs := watches[name].MACsSince(start); !slices.Equal(macs, []string{want}) {
			t.Errorf("%s (%s): ARP answered by %s during the rotation, want only its owner %s", name, vip, f.describeMACs(macs), f.owner(vip))
		}
	}
	f.expectOwners(t, vips, "after the rotation")
	status, metric, err := f.leaderChanges(t.Context(), vips)
	if err != nil {
		t.Fatal(err)
	}
	for name := range vips {
		if status[name] != statusBefore[name] || metric[name] != metricBefore[name] {
			t.Errorf("%s: leader changes went from %d (VIPStatus) and %d (metric) to %d and %d, want no move",
				name, statusBefore[name], metricBefore[name], status[name], metric[name])
		}
	}

	after := memberlistSecret()
	f.getObject(t, after)
	ring, err := memberkey.KeyringFromSecretData(after.Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(ring) != 1 || ring.Index(oldRing.Primary()) >= 0 {
		t.Errorf("after the rotation the Secret holds %d keys (old key kept: %v), want only the new one", len(ring), ring.Index(oldRing.Primary()) >= 0)
	}
	status2, err := f.s.Exec(t.Context(), lab.CPHost, f.s.Herald, "memberlist-key", "status", "--kubeconfig", f.s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(status2), "(in step)"); n != len(f.nodes) {
		t.Errorf("%d of %d speakers in step with the Secret:\n%s", n, len(f.nodes), status2)
	}
	if strings.Contains(string(status2), memberkey.Fingerprint(oldRing.Primary())) {
		t.Errorf("a speaker still holds the old key:\n%s", status2)
	}
	for _, n := range f.nodes {
		text, err := f.s.Scrape(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := sampleValue(text, "herald_speaker_memberlist_keys"); v != 1 {
			t.Errorf("%s: herald_speaker_memberlist_keys = %v, want 1", n, v)
		}
		if v, _ := sampleValue(text, "herald_speaker_memberlist_key_changes_total"); v < 3 {
			t.Errorf("%s: herald_speaker_memberlist_key_changes_total = %v, want at least 3 (add, use, remove)", n, v)
		}
	}
}

func memberlistSecret() *corev1.Secret {
	s := &corev1.Secret{}
	s.Namespace, s.Name = lab.HeraldNamespace, memberkey.SecretName
	return s
}
