package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/netns"
)

// Faults that move a VIP, as MeasureFailover names them.
const (
	FaultLinkDown = "link-down"
	FaultKill     = "kill"
	FaultStop     = "stop"
)

// httpRecoveryLimit is how long MeasureFailover waits for requests to succeed again.
const httpRecoveryLimit = 30 * time.Second

// FailoverResult is what the client saw when the owner of a VIP failed.
type FailoverResult struct {
	VIP      netip.Addr
	Fault    string
	OldOwner string
	NewOwner string
	// ARPGap is from the fault to the first ARP reply from the new owner.
	ARPGap time.Duration
	// HTTP is whether requests were measured (they succeeded before the fault).
	HTTP bool
	// HTTPRecovered is whether a request succeeded within the limit after the fault;
	// HTTPGap is from the fault to the first that did, and HTTPFailed counts the
	// requests that failed in between.
	HTTPRecovered bool
	HTTPGap       time.Duration
	HTTPFailed    int
}

// Print says what happened in a few lines.
func (r FailoverResult) Print(w io.Writer) {
	fmt.Fprintf(w, "%s: owner %s, fault %s\n", r.VIP, r.OldOwner, r.Fault)
	fmt.Fprintf(w, "  new owner %s answered ARP %v after the fault\n", r.NewOwner, r.ARPGap.Round(time.Millisecond))
	switch {
	case r.HTTP && r.HTTPRecovered:
		fmt.Fprintf(w, "  HTTP from the client: first success %v after the fault (%d requests failed meanwhile)\n", r.HTTPGap.Round(time.Millisecond), r.HTTPFailed)
	case r.HTTP:
		fmt.Fprintf(w, "  HTTP from the client: NO request succeeded within %v of the fault (%d failed)\n", httpRecoveryLimit, r.HTTPFailed)
	default:
		fmt.Fprintf(w, "  HTTP not measured: requests to http://%s/ did not succeed before the fault\n", r.VIP)
	}
}

// MeasureFailover finds the owner of vip from the client (the one MAC answering ARP),
// inflicts fault on it, and measures from the client how long until another node
// answers and, when requests to the VIP succeed beforehand, until they succeed again.
// The fault is left in place; the caller undoes it (LinkUp, StartSpeaker).
func (s *State) MeasureFailover(ctx context.Context, vip netip.Addr, fault string) (FailoverResult, error) {
	res := FailoverResult{VIP: vip, Fault: fault}
	client, err := s.Host(ClientHost)
	if err != nil {
		return res, err
	}
	watch, err := WatchARP(client.Namespace, vip, 10*time.Millisecond)
	if err != nil {
		return res, err
	}
	defer watch.Close()
	mac, err := watch.Settle(time.Second, 30*time.Second)
	if err != nil {
		return res, fmt.Errorf("lab: owner of %s before the fault: %w", vip, err)
	}
	owner, ok := s.HostByMAC(mac)
	if !ok {
		return res, fmt.Errorf("lab: %s answers for %s and is no lab host", mac, vip)
	}
	res.OldOwner = owner.Name

	probe := StartHTTPProbe(client.Namespace, "http://"+vip.String()+"/", 20*time.Millisecond, 300*time.Millisecond)
	defer probe.Stop()
	time.Sleep(500 * time.Millisecond)
	res.HTTP = probe.succeededSince(time.Now().Add(-500 * time.Millisecond))

	at := time.Now()
	switch fault {
	case FaultLinkDown:
		err = s.LinkDown(ctx, owner.Name)
	case FaultKill:
		err = s.KillSpeaker(owner.Name)
	case FaultStop:
		// Not StopSpeaker, which waits for the exit: the measurement must run meanwhile.
		var p netlab.Proc
		if p, err = s.proc(owner.Name, "speaker"); err == nil {
			err = p.Signal(syscall.SIGTERM)
		}
	default:
		err = fmt.Errorf("lab: fault %q, want %s, %s or %s", fault, FaultLinkDown, FaultKill, FaultStop)
	}
	if err != nil {
		return res, err
	}
	newMAC, err := watch.Settle(time.Second, 30*time.Second, mac)
	if err != nil {
		return res, fmt.Errorf("lab: after %s of %s: %w", fault, owner.Name, err)
	}
	if h, ok := s.HostByMAC(newMAC); ok {
		res.NewOwner = h.Name
	} else {
		res.NewOwner = newMAC
	}
	first, _ := watch.FirstFrom(newMAC, at)
	res.ARPGap = first.Sub(at)
	if res.HTTP {
		ok, failed, err := probe.firstSuccessAfter(ctx, at, httpRecoveryLimit)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.HTTPRecovered, res.HTTPFailed = err == nil, failed
		if err == nil {
			res.HTTPGap = ok.Sub(at)
		}
	}
	return res, nil
}

// HTTPProbe sends a GET every interval from inside a namespace, each on a new
// connection, and records when each one started and ended and whether it succeeded.
type HTTPProbe struct {
	mu      sync.Mutex
	results []probeResult
	cancel  context.CancelFunc
	done    chan struct{}
}

type probeResult struct {
	start, end time.Time
	err        error
	ok         bool
}

// ProbeFailure is a request of an HTTPProbe that failed: when it started, and why.
type ProbeFailure struct {
	Start time.Time
	Err   error
}

// StartHTTPProbe starts probing url from the namespace ns until Stop; timeout bounds
// each request.
func StartHTTPProbe(ns, url string, interval, timeout time.Duration) *HTTPProbe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &HTTPProbe{cancel: cancel, done: make(chan struct{})}
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true}, Timeout: timeout}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			start := time.Now()
			_, err := getHostname(ctx, hc, url)
			p.mu.Lock()
			p.results = append(p.results, probeResult{start: start, end: time.Now(), err: err, ok: err == nil})
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	return p
}

// Stop ends the probing and waits for the request under way.
func (p *HTTPProbe) Stop() {
	p.cancel()
	<-p.done
}

// Between counts the requests that started from from until to and returns those that
// failed.
func (p *HTTPProbe) Between(from, to time.Time) (n int, failed []ProbeFailure) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.results {
		if r.start.Before(from) || !r.start.Before(to) {
			continue
		}
		n++
		if !r.ok {
			failed = append(failed, ProbeFailure{Start: r.start, Err: r.err})
		}
	}
	return n, failed
}

func (p *HTTPProbe) succeededSince(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.results {
		if r.end.After(t) && r.ok {
			return true
		}
	}
	return false
}

// firstSuccessAfter waits for a request that started after t and succeeded, counting
// the failures before it; it returns when that request ended. Requests already under
// way at t do not count: they may have reached the old owner just in time.
func (p *HTTPProbe) firstSuccessAfter(ctx context.Context, t time.Time, limit time.Duration) (time.Time, int, error) {
	deadline := time.Now().Add(limit)
	for {
		p.mu.Lock()
		failed := 0
		for _, r := range p.results {
			if !r.start.After(t) {
				continue
			}
			if r.ok {
				p.mu.Unlock()
				return r.end, failed, nil
			}
			failed++
		}
		p.mu.Unlock()
		if time.Now().After(deadline) {
			return time.Time{}, failed, fmt.Errorf("lab: no request succeeded within %v of the fault (%d failed)", limit, failed)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, failed, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
