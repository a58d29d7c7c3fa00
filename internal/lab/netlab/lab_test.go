package netlab_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/testkit"
)

func TestHostsReachEachOtherAndLinkDownCutsThemOff(t *testing.T) {
	l := newLab(t, "nl-p-")
	w1 := addHost(t, l, "w1", "172.18.0.3")
	w2 := addHost(t, l, "w2", "172.18.0.4")

	if err := ping(w1, w2.Addr()); err != nil {
		t.Fatalf("w1 → w2: %v", err)
	}
	if err := ping(w2, w1.Addr()); err != nil {
		t.Fatalf("w2 → w1: %v", err)
	}
	gw, _ := l.Gateway(w1.Addr())
	if err := ping(w1, gw); err != nil {
		t.Fatalf("w1 → gateway %s: %v", gw, err)
	}

	if err := w2.LinkDown(); err != nil {
		t.Fatal(err)
	}
	if err := ping(w1, w2.Addr()); err == nil {
		t.Fatal("w1 reached w2 with w2's link down")
	}
	// The host keeps its address while its cable is out, as a node would.
	out, err := w2.Exec(context.Background(), "ip", "-br", "addr", "show", "eth0")
	if err != nil || !strings.Contains(string(out), "172.18.0.4/16") {
		t.Fatalf("w2's eth0 with the link down: %s %v", out, err)
	}

	if err := w2.LinkUp(); err != nil {
		t.Fatal(err)
	}
	// The carrier comes back at once, but allow for the neighbour entry to recover.
	testkit.Eventually(t, 5*time.Second, 0, "w1 → w2 after LinkUp", func() error { return ping(w1, w2.Addr()) })
}

func TestMACIsPredictable(t *testing.T) {
	l := newLab(t, "nl-m-")
	h := addHost(t, l, "w1", "172.18.0.3")
	if want := "02:42:ac:12:00:03"; h.MAC().String() != want || netlab.MACFor(h.Addr()).String() != want {
		t.Fatalf("MAC %s, MACFor %s, want %s", h.MAC(), netlab.MACFor(h.Addr()), want)
	}
	out, err := runIP("-n", h.Namespace(), "-j", "link", "show", "eth0")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var links []struct {
		Address   string `json:"address"`
		Operstate string `json:"operstate"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link: %v: %s", err, out)
	}
	if links[0].Address != h.MAC().String() || links[0].Operstate != "UP" {
		t.Fatalf("eth0 is %+v, want address %s and UP", links[0], h.MAC())
	}
}

func TestIPv6(t *testing.T) {
	l := newLab(t, "nl-six-")
	if err := l.AddSubnet(subnet6); err != nil {
		t.Fatal(err)
	}
	w1 := addHost(t, l, "w1", "172.18.0.3")
	if err := w1.AddAddr(netip.MustParseAddr("fc00:f853:ccd:e793::3")); err != nil {
		t.Fatal(err)
	}
	// A host whose first address is IPv6 works too.
	w2 := addHost(t, l, "w2", "fc00:f853:ccd:e793::4")

	if err := ping(w1, w2.Addr()); err != nil {
		t.Fatalf("w1 → w2 over IPv6: %v", err)
	}
	if err := ping(w2, netip.MustParseAddr("fc00:f853:ccd:e793::3")); err != nil {
		t.Fatalf("w2 → w1 over IPv6: %v", err)
	}
	if got := w1.Addrs(); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("172.18.0.3"), netip.MustParseAddr("fc00:f853:ccd:e793::3")}) {
		t.Fatalf("w1.Addrs() = %v", got)
	}
	// nodad: the address is usable at once, never tentative.
	out, err := w1.Exec(context.Background(), "ip", "-6", "addr", "show", "dev", "eth0", "tentative")
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("tentative addresses on w1: %q %v", out, err)
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	labtest.Require(t)
	const prefix = "nl-x-"
	if err := netlab.Cleanup(prefix, ""); err != nil {
		t.Fatal(err)
	}
	l, err := netlab.New(prefix, subnet, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() }) // if the test fails before its own Close
	addHost(t, l, "a", "172.18.0.3")
	b := addHost(t, l, "b", "172.18.0.4")
	p, err := b.Start("sleep", "sleep", "300")
	if err != nil {
		t.Fatal(err)
	}
	// A host that fails half-way (the address is the gateway's) leaves nothing either.
	if _, err := l.AddHost("c", netip.MustParseAddr("172.18.0.1")); err == nil {
		t.Fatal("AddHost with the gateway's address succeeded")
	}
	if got, want := labNamespaces(t, prefix), []string{"nl-x-a", "nl-x-b", "nl-x-br"}; !sameSet(got, want) {
		t.Fatalf("namespaces %v, want %v", got, want)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if left := labNamespaces(t, prefix); len(left) > 0 {
		t.Fatalf("namespaces left after Close: %v", left)
	}
	if !p.Exited() {
		t.Fatal("process still running after Close")
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestNewRejectsBadPrefixes(t *testing.T) {
	for _, p := range []string{"", "hl", "h-", "-l-", "HL-", "hl_", "hl-x"} {
		if _, err := netlab.New(p, subnet, t.TempDir()); err == nil {
			t.Errorf("New(%q) succeeded", p)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
