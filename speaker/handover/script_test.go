package handover

import (
	"net/netip"
	"os"
	"strings"
	"testing"
)

func TestStartScript(t *testing.T) {
	got := startScript(Forward{IP: netip.MustParseAddr("10.77.0.100"), To: netip.MustParseAddr("10.77.0.2")})
	for _, want := range []string{
		"add chain ip herald-handover vip-10-77-0-100 { type filter hook prerouting priority mangle; policy accept; }",
		"add rule ip herald-handover vip-10-77-0-100 ip daddr 10.77.0.100 tcp flags & (fin|syn|rst|ack) != syn ct state new,invalid " +
			"update @flows-10-77-0-100 { ip saddr . tcp sport . ip daddr . tcp dport } counter dup to 10.77.0.2 drop",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("script lacks %q:\n%s", want, got)
		}
	}
	v6 := startScript(Forward{IP: netip.MustParseAddr("fd00::64"), To: netip.MustParseAddr("fd00::2")})
	if !strings.Contains(v6, "add rule ip6 herald-handover vip-fd00--64 ip6 daddr fd00::64 ") ||
		!strings.Contains(v6, "type ipv6_addr . inet_service . ipv6_addr . inet_service;") || !strings.Contains(v6, "dup to fd00::2 drop") {
		t.Errorf("IPv6 script:\n%s", v6)
	}
	if end := endScript(netip.MustParseAddr("fd00::64")); end != "delete chain ip6 herald-handover vip-fd00--64\ndelete set ip6 herald-handover flows-fd00--64\n" {
		t.Errorf("end script %q", end)
	}
}

func TestParseCounts(t *testing.T) {
	out, err := os.ReadFile("testdata/list-table.json") // nft 1.0.6, one flow forwarded
	if err != nil {
		t.Fatal(err)
	}
	packets, elems, err := parseCounts(out)
	if err != nil {
		t.Fatal(err)
	}
	if packets["forward-unknown"] != 41 || elems["flows"] != 1 {
		t.Errorf("packets %v, elements %v; want 41 packets and 1 flow", packets, elems)
	}
	if _, _, err := parseCounts([]byte("{")); err == nil {
		t.Error("truncated JSON read without error")
	}
}
