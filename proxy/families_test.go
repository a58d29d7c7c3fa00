package proxy

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"herald.dev/herald/proxy/model"
	"herald.dev/herald/proxy/runner"
)

func TestPlanFamilies(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("2001:db8::3")
	tools := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	v4Tools := []string{"iptables", "iptables-restore", "iptables-save"}
	v6Tools := []string{"ip6tables", "ip6tables-restore", "ip6tables-save"}
	all := tools(append(v4Tools, v6Tools...)...)
	for _, tc := range []struct {
		name     string
		ips      []netip.Addr
		mode     Mode
		backend  runner.Backend
		host     hostTools
		program  []model.Family
		degraded []model.Family
		skipped  map[model.Family]string // substrings
		err      string
	}{
		{name: "dual-stack, everything there", ips: []netip.Addr{v4, v6}, host: hostTools{all, true},
			program: []model.Family{model.IPv4, model.IPv6}, skipped: map[model.Family]string{}},
		{name: "IPv4 node: IPv6 left out quietly", ips: []netip.Addr{v4}, host: hostTools{all, true},
			program: []model.Family{model.IPv4}, skipped: map[model.Family]string{model.IPv6: "no IPv6 address"}},
		{name: "IPv4-mapped counts as IPv4", ips: []netip.Addr{netip.MustParseAddr("::ffff:192.0.2.3")}, host: hostTools{all, true},
			program: []model.Family{model.IPv4}, skipped: map[model.Family]string{model.IPv6: "no IPv6 address"}},
		{name: "dual-stack without ip6tables-restore", ips: []netip.Addr{v6, v4},
			host:    hostTools{tools(append(v4Tools, "ip6tables", "ip6tables-save")...), true},
			program: []model.Family{model.IPv4}, degraded: []model.Family{model.IPv6},
			skipped: map[model.Family]string{model.IPv6: "ip6tables-restore not found"}},
		{name: "dual-stack, kernel without IPv6", ips: []netip.Addr{v4, v6}, host: hostTools{all, false},
			program: []model.Family{model.IPv4}, degraded: []model.Family{model.IPv6},
			skipped: map[model.Family]string{model.IPv6: "/proc/sys/net/ipv6"}},
		{name: "IPv4 node, kernel without IPv6: not even looked at", ips: []netip.Addr{v4}, host: hostTools{tools(v4Tools...), false},
			program: []model.Family{model.IPv4}, skipped: map[model.Family]string{model.IPv6: "no IPv6 address"}},
		{name: "IPv6 node without IPv4 tools", ips: []netip.Addr{v6}, host: hostTools{tools(v6Tools...), true},
			program: []model.Family{model.IPv6}, skipped: map[model.Family]string{model.IPv4: "no IPv4 address"}},
		{name: "no iptables at all", ips: []netip.Addr{v4, v6}, host: hostTools{tools(), true},
			err: "iptables, iptables-restore, iptables-save not found in $PATH: install the Debian package iptables"},
		{name: "IPv4 without iptables-save", ips: []netip.Addr{v4}, host: hostTools{tools("iptables", "iptables-restore"), true},
			err: "iptables-save not found in $PATH: install the Debian package iptables"},
		{name: "IPv6-only node without ip6tables", ips: []netip.Addr{v6}, host: hostTools{tools(v4Tools...), true},
			err: "no IP family can be programmed: ip6tables, ip6tables-restore, ip6tables-save not found in $PATH (Debian package iptables)"},
		{name: "IPv6-only node, kernel without IPv6", ips: []netip.Addr{v6}, host: hostTools{all, false},
			err: "no IP family can be programmed: the kernel has IPv6 turned off"},
		{name: "legacy backend names", ips: []netip.Addr{v4, v6}, backend: runner.BackendLegacy,
			host:    hostTools{tools("iptables-legacy", "iptables-legacy-restore", "iptables-legacy-save", "ip6tables"), true},
			program: []model.Family{model.IPv4}, degraded: []model.Family{model.IPv6},
			skipped: map[model.Family]string{model.IPv6: "ip6tables-legacy, ip6tables-legacy-restore, ip6tables-legacy-save not found"}},
		{name: "legacy backend, default names do not count", ips: []netip.Addr{v4}, backend: runner.BackendLegacy, host: hostTools{all, true},
			err: "iptables-legacy, iptables-legacy-restore, iptables-legacy-save not found"},
		{name: "nftables mode needs only nft", ips: []netip.Addr{v4, v6}, mode: ModeNFTables, host: hostTools{tools("nft"), true},
			program: []model.Family{model.IPv4, model.IPv6}, skipped: map[model.Family]string{}},
		{name: "nftables mode without nft", ips: []netip.Addr{v4}, mode: ModeNFTables, host: hostTools{all, true},
			err: "nft not found in $PATH: install the Debian package nftables"},
		{name: "nftables mode, kernel without IPv6", ips: []netip.Addr{v4, v6}, mode: ModeNFTables, host: hostTools{tools("nft"), false},
			program: []model.Family{model.IPv4}, degraded: []model.Family{model.IPv6},
			skipped: map[model.Family]string{model.IPv6: "/proc/sys/net/ipv6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mode := tc.mode
			if mode == "" {
				mode = ModeIPTables
			}
			plan, err := planFamilies(tc.ips, toolset{mode: mode, backend: tc.backend}, tc.host)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(plan.program, tc.program) || !reflect.DeepEqual(plan.degraded, tc.degraded) {
				t.Errorf("program %v degraded %v, want %v and %v", plan.program, plan.degraded, tc.program, tc.degraded)
			}
			if len(plan.skipped) != len(tc.skipped) {
				t.Errorf("skipped %v, want %v", plan.skipped, tc.skipped)
			}
			for f, sub := range tc.skipped {
				if !strings.Contains(plan.skipped[f], sub) {
					t.Errorf("skipped[%s] = %q, want it to contain %q", f, plan.skipped[f], sub)
				}
			}
		})
	}
}

func TestFamilyPlanSummary(t *testing.T) {
	plan := familyPlan{program: []model.Family{model.IPv4},
		skipped: map[model.Family]string{model.IPv6: "the kernel has IPv6 turned off"}}
	msg, kv := plan.summary()
	if msg != "service proxy programs IPv4 only" || !reflect.DeepEqual(kv, []any{"noIPv6", "the kernel has IPv6 turned off"}) {
		t.Errorf("summary %q %v", msg, kv)
	}
	plan = familyPlan{program: []model.Family{model.IPv4, model.IPv6}}
	if msg, kv := plan.summary(); msg != "service proxy programs IPv4 and IPv6" || kv != nil {
		t.Errorf("summary %q %v", msg, kv)
	}
}
