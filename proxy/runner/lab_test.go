package runner

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/proxy/model"
)

// TestRunnerInNamespace drives the real binaries in a namespace of the test's own.
func TestRunnerInNamespace(t *testing.T) {
	lab := labtest.NewNet(t, "hpxr-", netip.MustParsePrefix("172.31.1.0/24"))
	host := labtest.AddHost(t, lab, "node", netip.MustParseAddr("172.31.1.3"))
	ctx := context.Background()
	r, err := New(model.IPv4, host.Do, BackendDefault)
	if err != nil {
		t.Fatal(err)
	}

	// Restore with --noflush: the chains named are replaced, others stay.
	if err := r.Restore(ctx, []byte("*nat\n:KUBE-SVC-A - [0:0]\n:KUBE-SVC-B - [0:0]\n-A KUBE-SVC-A -j RETURN\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(ctx, []byte("*nat\n:KUBE-SVC-B - [0:0]\n-A KUBE-SVC-B -j RETURN\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	chains, err := r.Chains(ctx, "nat")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"PREROUTING", "KUBE-SVC-A", "KUBE-SVC-B"} {
		if !slices.Contains(chains, c) {
			t.Errorf("nat chains %v lack %s", chains, c)
		}
	}

	// A payload the kernel refuses fails whole, and the error says why.
	err = r.Restore(ctx, []byte("*nat\n:KUBE-SVC-C - [0:0]\n-A KUBE-SVC-C -j KUBE-NOWHERE\nCOMMIT\n"))
	if err == nil || !strings.Contains(err.Error(), "KUBE-NOWHERE") {
		t.Errorf("bad payload: %v", err)
	}
	if ok, err := r.ChainExists("nat", "KUBE-SVC-C"); err != nil || ok {
		t.Errorf("KUBE-SVC-C exists %v %v after a failed restore", ok, err)
	}

	// EnsureChain and EnsureRule are idempotent.
	for range 2 {
		if err := r.EnsureChain("filter", "KUBE-FORWARD"); err != nil {
			t.Fatal(err)
		}
		if err := r.EnsureRule("filter", "FORWARD", "-m", "comment", "--comment", "kubernetes forwarding rules", "-j", "KUBE-FORWARD"); err != nil {
			t.Fatal(err)
		}
	}
	out, err := host.Exec(ctx, "iptables", "-S", "FORWARD")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "-j KUBE-FORWARD"); n != 1 {
		t.Errorf("FORWARD has %d jumps:\n%s", n, out)
	}
	if ok, err := r.ChainExists("mangle", "KUBE-PROXY-CANARY"); err != nil || ok {
		t.Errorf("missing chain: %v %v", ok, err)
	}

	// Host facts come from the namespace too.
	addrs, err := InterfaceAddrs(host.Do)
	if err != nil || !slices.Contains(addrs, netip.MustParseAddr("172.31.1.3")) {
		t.Errorf("interface addresses %v %v", addrs, err)
	}
	if _, err := host.Exec(ctx, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"); err != nil {
		t.Fatal(err)
	}
	if v, err := Sysctl(host.Do, "net.ipv4.ip_forward"); err != nil || v != "1" {
		t.Errorf("ip_forward = %q %v", v, err)
	}
	if v, err := Sysctl(host.Do, "net.nothing.here"); err != nil || v != "" {
		t.Errorf("missing sysctl = %q %v", v, err)
	}

	ct, err := NewConntrack(host.Do)
	if errors.Is(err, ErrNoConntrack) {
		t.Fatalf("install the conntrack package: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := ct.Delete(ctx, "-p", "udp", "--orig-dst", "10.0.0.1"); err != nil {
		t.Errorf("deleting nothing: %v", err)
	}
}
