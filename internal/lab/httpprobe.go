package lab

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"herald.dev/herald/internal/netns"
)

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
	return between(p.results, from, to)
}

// between counts the results that started from from until to and returns those that
// failed.
func between(results []probeResult, from, to time.Time) (n int, failed []ProbeFailure) {
	for _, r := range results {
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
