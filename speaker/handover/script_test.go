package handover

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// The forwardings a speaker saves come back for the next one until their drain period
// ends; a file from another node or an unreadable one gives none.
func TestForwardsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	fw := Forward{IP: netip.MustParseAddr("10.77.0.100"), From: "w1", To: netip.MustParseAddr("10.77.0.2"),
		Why: "cordoned", Since: now, Until: now.Add(5 * time.Minute)}
	bad := Forward{IP: netip.MustParseAddr("fd00::1"), From: "w1", To: netip.MustParseAddr("10.77.0.2"), Until: now.Add(time.Hour)}
	if err := saveForwards(dir, "w2", []Forward{fw, bad}); err != nil {
		t.Fatal(err)
	}
	got, err := loadForwards(dir, "w2", now.Add(time.Minute))
	if err != nil || len(got) != 1 || got[0].IP != fw.IP || got[0].To != fw.To || !got[0].Until.Equal(fw.Until) || got[0].Why != "cordoned" {
		t.Fatalf("loaded %+v, %v; want %+v alone (the family mismatch dropped)", got, err, fw)
	}
	if got, _ := loadForwards(dir, "w2", now.Add(6*time.Minute)); len(got) != 0 {
		t.Errorf("after the drain period: %+v, want none", got)
	}
	if got, _ := loadForwards(dir, "w3", now); len(got) != 0 {
		t.Errorf("another node's: %+v, want none", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "handovers-w4"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := loadForwards(dir, "w4", now); err == nil || len(got) != 0 {
		t.Errorf("an unreadable file: %+v, %v; want an error and none", got, err)
	}
}
