package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
)

// A Service's owner can edit its annotations; the speakers must not let that choose
// where its VIP is announced. With the controller stopped (nothing rewrites the
// annotation), herald.dev/ip-allocated-from-pool is set to a pool whose
// L2Advertisement selects another node: the VIP stays on the node its own pool's
// advertisement selects, with no other MAC answering, because the speakers take the
// pool from the IP.
func TestLabPoolComesFromTheIP(t *testing.T) {
	f := fullLabFor(t)
	home, away := "he-trust-home", "he-trust-away"
	first := netip.MustParseAddr("172.18.255.30")
	order := election.Order(first, f.nodes)
	hostname := func(node string) []heraldv1.LabelSelector {
		return []heraldv1.LabelSelector{{MatchExpressions: []heraldv1.LabelSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: metav1.LabelSelectorOpIn, Values: []string{node}}}}}
	}
	for pool, r := range map[string]heraldv1.AddressRange{home: "172.18.255.30-172.18.255.34", away: "172.18.255.35-172.18.255.39"} {
		f.createObject(t, &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: pool},
			Spec: heraldv1.IPAddressPoolSpec{Addresses: []heraldv1.AddressRange{r}, AutoAssign: ptrTo(false)}})
	}
	// The home pool is announced by the election's last choice, the other pool by its
	// first: a move to the other pool's nodes could not be the election's own doing.
	f.createObject(t, &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: home},
		Spec: heraldv1.L2AdvertisementSpec{IPAddressPools: []string{home}, NodeSelectors: hostname(order[2])}})
	f.createObject(t, &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: away},
		Spec: heraldv1.L2AdvertisementSpec{IPAddressPools: []string{away}, NodeSelectors: hostname(order[0])}})
	svc := f.createService(t, testkit.LBService("default", "trust",
		webpods, testkit.Annotated(heraldv1.AnnotationAddressPool, home)))
	vip := f.waitIP(t, svc.Name)
	if vip != first {
		t.Fatalf("Service trust got %s, want %s, the first address of pool %s", vip, first, home)
	}
	f.expectOwner(t, vip, order[2], "announced by the node of pool "+home)

	controller := f.s.Procs[lab.CPHost+"-controller"]
	if err := controller.Stop(15 * time.Second); err != nil {
		t.Fatalf("stopping herald's controller: %v", err)
	}
	t.Cleanup(func() {
		if err := f.s.RestartController(context.Background()); err != nil { // t.Context() has ended by now
			t.Errorf("starting herald's controller again: %v", err)
		}
	})

	w, err := lab.WatchNeighbour(f.clientNS, vip, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	from := time.Now()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, heraldv1.AnnotationAllocatedFromPool, away)
	if _, err := f.Kube.CoreV1().Services(svc.Namespace).Patch(t.Context(), svc.Name, types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("editing the annotation %s: %v", heraldv1.AnnotationAllocatedFromPool, err)
	}
	// The speakers see the edit within a watch event; give them ample time to act on it.
	time.Sleep(5 * time.Second)
	macs := w.MACsSince(from)
	if want := []string{f.macs[order[2]]}; !slices.Equal(macs, want) {
		t.Fatalf("after %s was set to %s with the controller stopped, %s was answered by %s; want only %s",
			heraldv1.AnnotationAllocatedFromPool, away, vip, f.describeMACs(macs), f.describeMACs(want))
	}
	f.expectCurls(t, "http://"+vip.String()+"/", 10, "after the annotation edit")
}
