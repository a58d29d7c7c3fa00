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

// FailoverResult is what the client saw when the owner of a VIP failed. Every gap is
// measured from the moment the fault was in effect (the command inflicting it had
// returned: the link down, the signal delivered), never from before, so that no
// request that reached the old owner just in time counts as a recovery.
type FailoverResult struct {
	VIP      netip.Addr
	Fault    string
	OldOwner string
	NewOwner string
	// FaultTook is how long inflicting the fault took, from the command's start until
	// the fault was in effect.
	FaultTook time.Duration
	// ARPGap is from the fault to the first ARP reply from the new owner.
	ARPGap time.Duration
	// HTTP is whether requests were measured (they succeeded before the fault).
	HTTP bool
	// HTTPLastOK is from the end of the last successful request that started before
	// the fault to the fault (negative: it ended after the fault, under way meanwhile).
	HTTPLastOK time.Duration
	// HTTPRecovered is whether a request started after the fault succeeded within the
	// limit; HTTPGap is from the fault to the end of the first that did, and HTTPFailed
	// counts the requests that failed after the last success before the fault.
	HTTPRecovered bool
	HTTPGap       time.Duration
	HTTPFailed    int
}

// Print says what happened in a few lines.
func (r FailoverResult) Print(w io.Writer) {
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	fmt.Fprintf(w, "%s: owner %s, fault %s (in effect %v after it was started; times below from then)\n", r.VIP, r.OldOwner, r.Fault, ms(r.FaultTook))
	fmt.Fprintf(w, "  ARP from the client: new owner %s answered %v after the fault\n", r.NewOwner, ms(r.ARPGap))
	if !r.HTTP {
		fmt.Fprintf(w, "  HTTP not measured: requests to http://%s/ did not succeed before the fault\n", r.VIP)
		return
	}
	last := fmt.Sprintf("the last successful request ended %v before the fault", ms(r.HTTPLastOK))
	if r.HTTPLastOK < 0 {
		last = fmt.Sprintf("the last successful request started before the fault ended %v after it", ms(-r.HTTPLastOK))
	}
	if !r.HTTPRecovered {
		fmt.Fprintf(w, "  HTTP from the client: %s; NO request started after it succeeded within %v (%d failed)\n", last, httpRecoveryLimit, r.HTTPFailed)
		return
	}
	fmt.Fprintf(w, "  HTTP from the client: %s; the first request started after it succeeded %v after it; %d failed in between\n", last, ms(r.HTTPGap), r.HTTPFailed)
	if r.HTTPGap < r.ARPGap {
		fmt.Fprintf(w, "  (requests succeeded before the new owner answered ARP: the old owner's node still forwarded the traffic)\n")
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

	started := time.Now()
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
	at := time.Now() // the fault is in effect: measure from here
	res.FaultTook = at.Sub(started)
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
		ok, err := probe.firstSuccessAfter(ctx, at, httpRecoveryLimit)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		lastOK, lastStart := probe.lastSuccessBefore(at)
		res.HTTPLastOK = at.Sub(lastOK)
		res.HTTPRecovered = err == nil
		end := time.Now()
		if err == nil {
			res.HTTPGap = ok.Sub(at)
			end = ok
		}
		// The probe sends one request at a time: those started in between ran in between.
		_, failed := probe.Between(lastStart, end)
		res.HTTPFailed = len(failed)
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

// firstSuccessAfter waits for a request that started after t and succeeded, and
// returns when it ended. Requests already under way at t do not count: they may have
// reached the old owner just in time.
func (p *HTTPProbe) firstSuccessAfter(ctx context.Context, t time.Time, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		p.mu.Lock()
		for _, r := range p.results {
			if r.start.After(t) && r.ok {
				p.mu.Unlock()
				return r.end, nil
			}
		}
		p.mu.Unlock()
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("lab: no request succeeded within %v of the fault", limit)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// lastSuccessBefore returns when the last successful request that started before t
// ended, and when it started.
func (p *HTTPProbe) lastSuccessBefore(t time.Time) (end, start time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.results {
		if r.start.Before(t) && r.ok && r.end.After(end) {
			end, start = r.end, r.start
		}
	}
	return end, start
}
