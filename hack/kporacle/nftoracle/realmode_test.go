//go:build linux

package nftoracle

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// TestRealNFTablesInNetNS runs the oracle against the kernel's nftables
// inside a network namespace of its own: kube-proxy's transactions must be
// accepted by nft, and the table must then hold the service chains. The root
// namespace is only read.
func TestRealNFTablesInNetNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("real-mode test needs root (CAP_SYS_ADMIN to create and join a network namespace, CAP_NET_ADMIN for nft); run go test as root")
	}
	for _, tool := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("real-mode test needs the %s binary (Debian packages nftables and iproute2): %v", tool, err)
		}
	}
	ns := fmt.Sprintf("hko-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", ns, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	})

	var full, partial Result
	err := InNetNS(ns, func() error {
		nft, err := knftables.New(knftables.IPv4Family, TableName)
		if err != nil {
			return fmt.Errorf("knftables.New: %w", err)
		}
		opts := testOptions()
		opts.NFT = nft
		o, err := New(opts)
		if err != nil {
			return err
		}
		services, slices := world()
		Populate(o, services, slices)
		if full, err = o.Sync(); err != nil {
			return fmt.Errorf("first sync: %w\n%s", err, full.Transaction)
		}
		changed := slices[2].DeepCopy()
		changed.Endpoints[0].Addresses = []string{"10.180.0.6"}
		o.OnEndpointSliceUpdate(slices[2], changed)
		if partial, err = o.Sync(); err != nil {
			return fmt.Errorf("partial sync: %w\n%s", err, partial.Transaction)
		}
		if _, err := o.Dump(); err == nil {
			return fmt.Errorf("Dump with a real nftables did not fail")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !full.Full || partial.Full {
		t.Errorf("Full: first sync %v, second sync %v; want true, false", full.Full, partial.Full)
	}

	out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "ip", TableName).CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns exec %s nft list table ip %s: %v\n%s", ns, TableName, err, out)
	}
	listing := string(out)
	for _, want := range []string{
		"chain service-ULMVA6XW-ns1/svc1/tcp/p80 {",
		"chain external-ULMVA6XW-ns1/svc1/tcp/p80 {",
		"chain local-ULMVA6XW-ns1/svc1/tcp/p80 {",
		"chain endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 {",
		"chain firewall-4AT6LBPK-ns3/svc3/tcp/p80 {",
		"10.180.0.6 . 80", // the partial sync's new endpoint
		`"ns6/svc6:p80"`,  // the no-endpoint-services element's comment
	} {
		if !strings.Contains(listing, want) {
			t.Errorf("the namespace's table lacks %q:\n%s", want, listing)
		}
	}
	if strings.Contains(listing, "10.180.0.5 . 80") {
		t.Errorf("the partial sync left the old endpoint 10.180.0.5 in the table:\n%s", listing)
	}

	// Read-only look at the root namespace: none of this test's services.
	if root, err := exec.Command("nft", "list", "ruleset").CombinedOutput(); err == nil &&
		strings.Contains(string(root), "4AT6LBPK-ns3/svc3") {
		t.Errorf("the root network namespace holds this test's chains")
	}
}
