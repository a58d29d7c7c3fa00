package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/netns"
	"herald.dev/herald/internal/testkit"
)

// nodeDeathCutoff is the promise: no request fails later than this after a node
// running pods died.
const nodeDeathCutoff = time.Second

// TestLabNodeDeath pulls the cable of worker, which runs webpod1, while the client
// requests svc1..svc3 (webpod1 and webpod2 behind each, externalTrafficPolicy Cluster)
// ten times a second each. Every proxier must stop sending new connections to webpod1
// within a second, long before the API server marks it not ready (50 s): no request
// may fail later than nodeDeathCutoff after the fault. A keep-alive connection open to
// webpod1 must fail fast (a reset), not hang. The Node gets the Events
// EndpointsWithheld and, with the cable back, EndpointsRestored.
func TestLabNodeDeath(t *testing.T) {
	f := fullLabFor(t)
	const dead = "worker"
	f.expectNoFailureAfter(t, dead, linkDownFault, nodeDeathCutoff)
	f.expectNodeEvent(t, dead, heraldv1.ReasonEndpointsWithheld, "without a goodbye")
	f.expectNodeEvent(t, dead, heraldv1.ReasonEndpointsRestored, "")

	t.Run("an open connection to the dead pod fails fast", func(t *testing.T) {
		f.heal(t) // worker is back from the first fault: start whole, as every test does
		f.expectOwners(t, f.vips, "before the node's death")
		conn, rd, err := keepAliveTo(t.Context(), f.clientNS, f.vips["svc1"], "webpod1")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		heal := inflict(t, func(ctx context.Context) error { return f.s.LinkDown(ctx, dead) },
			func(ctx context.Context) error { return f.s.LinkUp(ctx, dead) })
		defer heal()
		at := time.Now()
		var ferr error
		for time.Since(at) < 10*time.Second {
			if ferr = keepAliveGet(conn, rd, f.vips["svc1"], 3*time.Second); ferr != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		took := time.Since(at)
		var ne net.Error
		switch {
		case ferr == nil:
			t.Fatalf("the connection to webpod1 still answered %v after %s's cable was pulled", took, dead)
		case errors.As(ferr, &ne) && ne.Timeout():
			t.Errorf("the connection to webpod1 hung (%v after the fault: %v), want a reset", took.Round(time.Millisecond), ferr)
		case took > 3*time.Second:
			t.Errorf("the connection to webpod1 failed %v after the fault (%v), want within 3 s", took.Round(time.Millisecond), ferr)
		default:
			t.Logf("the connection to webpod1 failed %v after the fault: %v", took.Round(time.Millisecond), ferr)
		}
		// While the node is dead, herald status names it below its table.
		testkit.Eventually(t, labtest.Wait, labtest.Interval, "herald status names "+dead+" as withheld", func() error {
			if out := f.heraldStatus(t); !strings.Contains(out, "node "+dead+" is dead to the speakers") {
				return fmt.Errorf("herald status:\n%s", out)
			}
			return nil
		})
	})
}

// nodeShutdownCutoff is the promise for a node that shuts down: its speaker says
// goodbye first, so its peers learn it is down from their probe of its host (sent
// twice a second, 250 ms to time out), not from memberlist.
const nodeShutdownCutoff = 1500 * time.Millisecond

// TestLabNodeShutdown shuts worker down as systemd would: its speaker gets SIGTERM and
// says goodbye (as on a restart), then the node goes away with its pods. The speakers
// hold its VIPs as for a restart until its host stops answering; from then on they
// must treat it as dead: no request may fail later than nodeShutdownCutoff after the
// node went (before, half of them failed until the API server marked the Node
// NotReady, 50 s), and the Node gets EndpointsWithheld saying why.
func TestLabNodeShutdown(t *testing.T) {
	f := fullLabFor(t)
	const down = "worker"
	f.expectNoFailureAfter(t, down, shutdownNodeFault, nodeShutdownCutoff)
	f.expectNodeEvent(t, down, heraldv1.ReasonEndpointsWithheld, "said goodbye")
}

// expectNoFailureAfter inflicts fault on node for 15 s while the client requests every
// walkthrough VIP ten times a second, then undoes it; it fails the test for each VIP
// whose requests still failed later than cutoff after the fault.
func (f *fullLab) expectNoFailureAfter(t *testing.T, node string, fault nodeFault, cutoff time.Duration) {
	t.Helper()
	var vips []netip.Addr
	for _, name := range walkthrough {
		vips = append(vips, f.vips[name])
	}
	f.expectOwners(t, f.vips, "before the "+fault.Name+" of "+node)
	res, err := measureNodeDeathFor(t.Context(), f.Lab, node, vips, fault, 15*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if res.Requests == 0 {
		t.Fatal("no request measured")
	}
	for vip, last := range res.LastFailureByVIP {
		if last > cutoff {
			t.Errorf("%s: a request that started %.2f s after the %s of %s failed; none may fail later than %v",
				vip, last.Seconds(), fault.Name, node, cutoff)
		}
	}
}

// keepAliveTo dials vip:80 from ns until a connection lands on the pod named pod, and
// returns it.
func keepAliveTo(ctx context.Context, ns string, vip netip.Addr, pod string) (net.Conn, *bufio.Reader, error) {
	dial := netns.Dialer(ns)
	for range 50 {
		conn, err := dial(ctx, "tcp", net.JoinHostPort(vip.String(), "80"))
		if err != nil {
			return nil, nil, err
		}
		rd := bufio.NewReader(conn)
		host, err := keepAliveHostname(conn, rd, vip, 2*time.Second)
		if err == nil && strings.Contains(host, pod) {
			return conn, rd, nil
		}
		conn.Close()
	}
	return nil, nil, fmt.Errorf("no connection to %s landed on %s in 50 tries", vip, pod)
}

// keepAliveHostname sends a GET on conn and returns the whoami Hostname line.
func keepAliveHostname(conn net.Conn, rd *bufio.Reader, vip netip.Addr, timeout time.Duration) (string, error) {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", vip); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		return "", fmt.Errorf("HTTP %s (close %v)", resp.Status, resp.Close)
	}
	sc := bufio.NewScanner(resp.Body)
	host := ""
	for sc.Scan() {
		if h, ok := strings.CutPrefix(sc.Text(), "Hostname: "); ok {
			host = h
		}
	}
	return host, sc.Err()
}

// keepAliveGet sends one GET on an open connection and reads the whole answer.
func keepAliveGet(conn net.Conn, rd *bufio.Reader, vip netip.Addr, timeout time.Duration) error {
	_, err := keepAliveHostname(conn, rd, vip, timeout)
	return err
}

// expectNodeEvent waits for an Event with reason on the Node named node.
func (f *fullLab) expectNodeEvent(t *testing.T, node, reason, note string) {
	t.Helper()
	testkit.Eventually(t, labtest.Wait, labtest.Interval, fmt.Sprintf("Node %s: an Event %s %q", node, reason, note), func() error {
		evs, err := f.Kube.EventsV1().Events("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Kind != "Node" || e.Regarding.Name != node {
				continue
			}
			if e.Reason == reason && strings.Contains(e.Note, note) {
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return fmt.Errorf("the Node's Events: %q", seen)
	})
}
