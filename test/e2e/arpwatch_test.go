package e2e

import (
	"net/netip"
	"testing"
	"time"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/netlab"
)

// watchARP asks who has ip from the host's eth0 every interval, recording every reply
// (lab.ARPWatch: how a LAN host sees a VIP move), until the test ends.
func watchARP(t testing.TB, h *netlab.Host, ip netip.Addr, interval time.Duration) *lab.ARPWatch {
	t.Helper()
	w, err := lab.WatchARP(h.Namespace(), ip, interval)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}
