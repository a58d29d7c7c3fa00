package labtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/netns"
)

// Wait bounds every wait for a lab to converge. It is a limit, never an assertion on
// speed: the machine running the tests may be busy.
const Wait = 90 * time.Second

// Interval is how often a wait for a lab asks again.
const Interval = 200 * time.Millisecond

// WaitHTTP waits until url, asked from inside h's namespace, answers 200 while p runs
// (lab.WaitHTTP), failing the test with the end of p's log otherwise.
func WaitHTTP(tb testing.TB, h *netlab.Host, p *netlab.Process, url string) {
	tb.Helper()
	if err := lab.WaitHTTP(context.Background(), h.Namespace(), url, p.Proc, Wait); err != nil {
		tb.Fatal(err)
	}
}

// Get makes one GET request to url from inside the namespace ns on a new connection and
// returns the body; an answer other than 200 is an error holding it.
func Get(ctx context.Context, ns, url string) (string, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true},
		Timeout: 2 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %s: %s", resp.Status, body)
	}
	return string(body), err
}

// WatchARP asks who has ip from eth0 of the namespace ns every interval, recording every
// reply (lab.ARPWatch: how a LAN host sees a VIP move), until the test ends.
func WatchARP(tb testing.TB, ns string, ip netip.Addr, interval time.Duration) *lab.ARPWatch {
	tb.Helper()
	w, err := lab.WatchARP(ns, ip, interval)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Close)
	return w
}

// WatchNDP solicits ip from eth0 of the namespace ns every interval, recording every
// advertisement (lab.NDPWatch: how a LAN host sees an IPv6 VIP move), until the test
// ends.
func WatchNDP(tb testing.TB, ns string, ip netip.Addr, interval time.Duration) *lab.NDPWatch {
	tb.Helper()
	w, err := lab.WatchNDP(ns, ip, interval)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Close)
	return w
}

// ARPWant is what WaitARP waits for: a test of the MACs answering over a window, and
// its description for the failure.
type ARPWant struct {
	What string
	OK   func(macs []string) bool
}

// Owner wants exactly one MAC answering, mac.
func Owner(mac string) ARPWant {
	return ARPWant{What: "exactly one: " + mac, OK: func(m []string) bool { return len(m) == 1 && m[0] == mac }}
}

// Silence wants no MAC answering.
func Silence() ARPWant {
	return ARPWant{What: "none", OK: func(m []string) bool { return len(m) == 0 }}
}

// WaitARP waits until the MACs answering w's requests (ARP, or NDP for an IPv6 address)
// over a whole window are as want says, failing the test after limit with those
// answering last; name, when not nil, names the host of each MAC in that message. Each
// window starts afresh, so a MAC that answered only before it does not count.
func WaitARP(tb testing.TB, w lab.NeighbourWatch, window, limit time.Duration, when string, want ARPWant, name func(mac string) string) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		start := time.Now()
		time.Sleep(window)
		macs := w.MACsSince(start)
		if want.OK(macs) {
			return
		}
		if time.Now().After(deadline) {
			seen := fmt.Sprint(macs)
			if name != nil {
				seen = "["
				for i, m := range macs {
					if i > 0 {
						seen += ", "
					}
					seen += m + " (" + name(m) + ")"
				}
				seen += "]"
			}
			protocol := "ARP"
			if w.IP().Is6() {
				protocol = "NDP"
			}
			tb.Fatalf("%s: after %v the MACs answering %s for %s over the last %v were %s; want %s",
				when, limit, protocol, w.IP(), window, seen, want.What)
		}
	}
}
