package layer2

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"golang.org/x/net/bpf"
)

func TestDefaultExcludeInterfaces(t *testing.T) {
	for name, excluded := range map[string]bool{
		"lo": true, "veth1a2b3c": true, "cali12345": true, "flannel.1": true, "cni0": true,
		"docker0": true, "cbr0": true, "lxc_health": true, "lxc1234": true, "cilium_host": true,
		"tunl0": true, "vxlan.calico": true, "kube-ipvs0": true, "nodelocaldns": true,
		"virbr0": true, "lxcbr0": true, "dummy0": true,
		"eth0": false, "ens3": false, "enp0s31f6": false, "bond0": false, "br0": false,
		"eth0.100": false, "lo1": false, "loopy": false, "wlan0": false, "vethernet": true,
	} {
		if got := defaultExclude.MatchString(name); got != excluded {
			t.Errorf("%s: excluded = %v, want %v", name, got, excluded)
		}
	}
}

func TestEligible(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	upBM := net.FlagUp | net.FlagRunning | net.FlagBroadcast | net.FlagMulticast
	f := func(name string, flags net.Flags, mut func(*Facts)) Facts {
		x := Facts{Interface: net.Interface{Name: name, Flags: flags, HardwareAddr: mac}, IPv6: true}
		if mut != nil {
			mut(&x)
		}
		return x
	}
	cases := []struct {
		facts   Facts
		exclude *regexp.Regexp
		want    Eligibility
	}{
		{f("eth0", upBM, nil), nil, Eligibility{ARP: true, NDP: true}},
		{f("eth0", upBM, func(x *Facts) { x.IPv6 = false }), nil, Eligibility{ARP: true}},
		{f("eth0", upBM&^net.FlagBroadcast, nil), nil, Eligibility{NDP: true}},
		{f("eth0", upBM&^net.FlagMulticast, nil), nil, Eligibility{ARP: true}},
		{f("eth0", net.FlagUp|net.FlagRunning, func(x *Facts) { x.IPv6 = false }), nil, Eligibility{Reason: "no-broadcast-no-ipv6"}},
		{f("veth12", upBM, nil), nil, Eligibility{Reason: "excluded"}},
		{f("eth0", upBM, nil), regexp.MustCompile(`^eth0$`), Eligibility{Reason: "excluded"}},
		{f("veth12", upBM, nil), regexp.MustCompile(`^eth9$`), Eligibility{ARP: true, NDP: true}},
		{f("lo0", upBM|net.FlagLoopback, nil), nil, Eligibility{Reason: "loopback"}},
		{f("eth0", upBM&^net.FlagUp, nil), nil, Eligibility{Reason: "down"}},
		{f("eth0", upBM&^net.FlagRunning, nil), nil, Eligibility{Reason: "down"}},
		{f("eth0", upBM, func(x *Facts) { x.NoARP = true }), nil, Eligibility{Reason: "noarp"}},
		{f("eth0", upBM, func(x *Facts) { x.Slave = true }), nil, Eligibility{Reason: "slave"}},
		{f("wg0", upBM, func(x *Facts) { x.HardwareAddr = nil }), nil, Eligibility{Reason: "no-mac"}},
		{f("ib0", upBM, func(x *Facts) { x.HardwareAddr = make(net.HardwareAddr, 20) }), nil, Eligibility{Reason: "no-mac"}},
	}
	for _, tc := range cases {
		if got := Eligible(tc.facts, tc.exclude); got != tc.want {
			t.Errorf("%s flags %v %+v: got %+v, want %+v", tc.facts.Name, tc.facts.Flags, tc.facts, got, tc.want)
		}
	}
}

// TestFactsOfSysfs reads a fake /sys/class/net tree.
func TestFactsOfSysfs(t *testing.T) {
	root := t.TempDir()
	mk := func(name, flags string, master bool) {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "flags"), []byte(flags+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if master {
			if err := os.Symlink("../bond0", filepath.Join(dir, "master")); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("eth0", "0x1003", false)
	mk("eth1", "0x1003", true)
	mk("kube-ipvs0", "0x82", false)
	v6 := []net.Addr{&net.IPNet{IP: net.ParseIP("fe80::1"), Mask: net.CIDRMask(64, 128)}}
	v4 := []net.Addr{&net.IPNet{IP: net.ParseIP("192.0.2.1").To4(), Mask: net.CIDRMask(24, 32)}}

	for _, tc := range []struct {
		name               string
		addrs              []net.Addr
		noarp, slave, ipv6 bool
	}{
		{"eth0", v6, false, false, true},
		{"eth0", v4, false, false, false},
		{"eth1", nil, false, true, false},
		{"kube-ipvs0", nil, true, false, false},
		{"missing", v6, false, false, true},
	} {
		f := factsOf(net.Interface{Name: tc.name}, tc.addrs, root)
		if f.NoARP != tc.noarp || f.Slave != tc.slave || f.IPv6 != tc.ipv6 {
			t.Errorf("%s: %+v, want noarp=%v slave=%v ipv6=%v", tc.name, f, tc.noarp, tc.slave, tc.ipv6)
		}
	}
}

// TestNDFilterMatch runs the neighbour discovery part of the socket filter in x/net/bpf's VM
// (which cannot run the packet-type and ifindex loads; the netns tests run the whole
// filters in the kernel).
func TestNDFilterMatch(t *testing.T) {
	vm, err := bpf.NewVM(ndMatch)
	if err != nil {
		t.Fatal(err)
	}
	udp := ns{nextHeader: 17}.bytes()
	adv := naBytes(t)
	for name, tc := range map[string]struct {
		frame []byte
		keep  bool
	}{
		"solicitation":  {ns{}.bytes(), true},
		"NUD probe":     {ns{dst: vip6, ethDst: ourMAC, noSLLA: true}.bytes(), true},
		"advertisement": {adv, true},
		"router advert": {ipv6Bytes(allNodesMAC, peerMAC, peer6, allNodes, 58, 255, []byte{134, 0, 0, 0}), false},
		"UDP":           {udp, false},
		"short":         {ns{}.bytes()[:30], false},
	} {
		n, err := vm.Run(tc.frame)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if (n > 0) != tc.keep {
			t.Errorf("%s: filter kept %d bytes, want keep=%v", name, n, tc.keep)
		}
	}
	for _, prog := range [][]bpf.RawInstruction{arpFilter(2), ndFilter(2)} {
		if _, ok := bpf.Disassemble(prog); !ok {
			t.Errorf("filter does not disassemble: %v", prog)
		}
	}
}
