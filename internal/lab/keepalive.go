package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"herald.dev/herald/internal/netns"
)

// KeepAliveProbe sends a GET every interval from inside a namespace over one
// long-lived TCP connection, as a client with a keep-alive connection does, and
// records each request and each time the connection broke (a reset, a timeout, the
// server closing it). After a break it dials a new connection at the next request.
type KeepAliveProbe struct {
	mu      sync.Mutex
	results []probeResult
	breaks  []ProbeFailure
	dials   int
	cancel  context.CancelFunc
	done    chan struct{}
}

// StartKeepAliveProbe starts probing rawURL (http://host[:port]/path) from the
// namespace ns until Stop; timeout bounds each request.
func StartKeepAliveProbe(ns, rawURL string, interval, timeout time.Duration) (*KeepAliveProbe, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("lab: keep-alive probe of %q: %w", rawURL, err)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &KeepAliveProbe{cancel: cancel, done: make(chan struct{})}
	dial := netns.Dialer(ns)
	go func() {
		defer close(p.done)
		var conn net.Conn
		var rd *bufio.Reader
		defer func() {
			if conn != nil {
				conn.Close()
			}
		}()
		for ctx.Err() == nil {
			start := time.Now()
			var err error
			if conn == nil {
				dctx, dcancel := context.WithTimeout(ctx, timeout)
				conn, err = dial(dctx, "tcp", addr)
				dcancel()
				if err == nil {
					rd = bufio.NewReader(conn)
					p.mu.Lock()
					p.dials++
					p.mu.Unlock()
				}
			}
			broke := false
			if err == nil {
				err = keepAliveGet(conn, rd, u, start.Add(timeout))
				broke = err != nil
			}
			p.mu.Lock()
			p.results = append(p.results, probeResult{start: start, end: time.Now(), err: err, ok: err == nil})
			if broke {
				p.breaks = append(p.breaks, ProbeFailure{Start: start, Err: err})
			}
			p.mu.Unlock()
			if err != nil && conn != nil {
				conn.Close()
				conn = nil
			}
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	return p, nil
}

// keepAliveGet sends one GET on conn and reads the whole response, by deadline.
func keepAliveGet(conn net.Conn, rd *bufio.Reader, u *url.URL, deadline time.Time) error {
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	path := u.RequestURI()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: herald-lab-keepalive\r\n\r\n", path, u.Host); err != nil {
		return err
	}
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	if resp.Close {
		return fmt.Errorf("the server closed the connection")
	}
	return nil
}

// Stop ends the probing and waits for the request under way.
func (p *KeepAliveProbe) Stop() {
	p.cancel()
	<-p.done
}

// Between counts the requests that started from from until to and returns those that
// failed.
func (p *KeepAliveProbe) Between(from, to time.Time) (n int, failed []ProbeFailure) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return between(p.results, from, to)
}

// Breaks returns when the connection broke (the request that found it broken) and
// why, and how many connections were dialled in all (1 when it never broke).
func (p *KeepAliveProbe) Breaks() (breaks []ProbeFailure, dials int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ProbeFailure(nil), p.breaks...), p.dials
}
