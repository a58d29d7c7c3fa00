package netlab

import (
	"net/netip"
	"testing"
)

func TestOwnedBy(t *testing.T) {
	for _, c := range []struct {
		prefix, ns string
		want       bool
	}{
		{"hl-", "hl-br", true},
		{"hl-", "hl-w1", true},
		{"hl-", "hl-", false},
		{"hl-", "hl-e2e-w1", false}, // the lab "hl-e2e-"'s
		{"hl-e2e-", "hl-e2e-w1", true},
		{"hl-", "xhl-w1", false},
		{"hl-", "hl-W1", false},
	} {
		if got := ownedBy(c.prefix, c.ns); got != c.want {
			t.Errorf("ownedBy(%q, %q) = %v", c.prefix, c.ns, got)
		}
	}
}

func TestMACFor(t *testing.T) {
	for addr, want := range map[string]string{
		"172.18.0.2":            "02:42:ac:12:00:02",
		"172.18.255.254":        "02:42:ac:12:ff:fe",
		"fc00:f853:ccd:e793::5": "02:42:00:00:00:05",
	} {
		if got := MACFor(netip.MustParseAddr(addr)).String(); got != want {
			t.Errorf("MACFor(%s) = %s, want %s", addr, got, want)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	z, ok := parseProcStat([]byte("12 (a) b) Z 7 12"))
	s, ok2 := parseProcStat([]byte("12 (sleep) S 1 12"))
	if !ok || !ok2 || !z.zombie || z.ppid != 7 || s.zombie || s.ppid != 1 {
		t.Fatalf("misread /proc/PID/stat: %+v %+v", z, s)
	}
}
