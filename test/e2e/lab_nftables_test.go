package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
)

const nftablesPrefix = "hn-"

// TestLabNFTables runs the walkthrough on a lab whose speakers proxy in nftables mode
// (--proxy=nftables): every VIP answers 100 curls from the client through both pods,
// the nodes hold table ip herald and no KUBE-SVC- iptables chain, externalTrafficPolicy
// Local keeps the client's address, a planned move (svc2's owner excluded by label)
// breaks none of five keep-alive connections, and after the owner of svc1 loses its
// cable the new owner serves the VIP.
func TestLabNFTables(t *testing.T) {
	f := ownLab(t, nftablesPrefix, "nftables", lab.Config{Workers: 3, Proxy: "nftables"}, true)

	for _, name := range walkthrough {
		vip := f.vips[name]
		f.expectOwner(t, vip, f.owner(vip), name+" announced")
		res := f.expectCurls(t, "http://"+vip.String()+"/", 100, name)
		if w1, w2 := res.Counts["Hostname: webpod1"], res.Counts["Hostname: webpod2"]; w1+w2 != 100 || w1 < 10 || w2 < 10 {
			t.Errorf("%s: answers by Hostname %v; want webpod1 and webpod2 only, each at least 10 of 100", name, res.Counts)
		}
	}

	for _, node := range f.nodes {
		out, err := f.s.Exec(t.Context(), node, "nft", "list", "table", "ip", "herald")
		if err != nil {
			t.Fatalf("nft list table ip herald on %s: %v", node, err)
		}
		if !strings.Contains(string(out), "chain service-") || !strings.Contains(string(out), "map service-ips") {
			t.Errorf("%s: table ip herald lacks the service chains:\n%s", node, out)
		}
		if nat := f.natTable(t, node); strings.Contains(nat, "KUBE-SVC-") {
			t.Errorf("%s: iptables nat holds KUBE-SVC- chains in nftables mode:\n%s", node, nat)
		}
	}

	sel := map[string]string{"herald-e2e/app": "local-nft"}
	f.createPod(t, "localnft", "worker3", sel)
	local := f.createService(t, testkit.LBService("default", "local-nft", webpods, func(s *corev1.Service) {
		s.Spec.Selector = sel
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}))
	vip := f.waitIP(t, local.Name)
	f.expectOwner(t, vip, "worker3", "the only pod on worker3")
	f.expectLocalAnswers(t, vip, "localnft")

	// A planned move in nftables mode: svc2's owner excluded by label while five
	// keep-alive connections run through it; the new owner forwards them.
	vip2 := f.vips["svc2"]
	from := f.owner(vip2)
	to := f.owner(vip2, without(f.nodes, from)...)
	moved := map[string]netip.Addr{"svc2": vip2}
	res := f.probedConns(t, moved, handoverConns, func() {
		f.setNodeLabel(t, from, election.ExcludeLabel, ptrTo(""))
		f.expectOwner(t, vip2, to, "svc2 with "+from+" excluded")
		time.Sleep(time.Second)
		f.expectForwarding(t, to, vip2, from, handoverConns)
	})
	f.setNodeLabel(t, from, election.ExcludeLabel, nil)
	expectNothingBroke(t, moved, res)
	f.rebalanceAll(t)

	vip = f.vips["svc1"]
	owner := f.owner(vip)
	f.expectOwner(t, vip, owner, "svc1 after the rebalance")
	if err := f.s.LinkDown(t.Context(), owner); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.s.LinkUp(t.Context(), owner) })
	next := f.owner(vip, without(f.nodes, owner)...)
	f.expectOwner(t, vip, next, "svc1's owner "+owner+" lost its cable")
	start := time.Now()
	f.expectCurls(t, "http://"+vip.String()+"/", 20, "svc1 after failover to "+next)
	t.Logf("svc1 (%s) moved from %s to %s; 20 curls through %s's nftables took %s", vip, owner, next, next, time.Since(start).Round(time.Millisecond))
}
