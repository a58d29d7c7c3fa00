package withhold

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// hostProber asks the nodes whose speaker vanished (or said goodbye) whether their host
// is still up. An answer comes from a running host: a refused connection (a reset from
// its kernel: nothing listens, the speaker is down) or a connection whose listener then
// answers a request, or closes. A connection that the kernel accepts but nobody serves
// is no answer: a frozen host (a paused VM or container) still completes TCP handshakes
// on the sockets of its frozen processes. No answer within the timeout is a node that is
// gone, frozen, or cut off on the network. It probes the memberlist port, kube-proxy's
// health port, 10256 (herald's proxier or kube-proxy serves it), so a firewall that
// drops only memberlist's port does not make a live node look dead, and the kubelet's
// port, 10250, whose TLS server answers a plain HTTP request with a 400: a speaker
// that alone is frozen or hung leaves the kubelet to show its node alive.
type hostProber struct {
	ports    []probePort
	timeout  time.Duration
	interval time.Duration
	changed  func() // called when a node's answer changed
	dial     func(ctx context.Context, addr string, ask bool) error

	mu       sync.Mutex
	targets  map[string]netip.Addr
	aliveAt  map[string]time.Time
	silentAt map[string]time.Time
	wake     chan struct{}
}

const (
	// hostProbeTimeout: a live host on the LAN answers a SYN within a millisecond.
	hostProbeTimeout = 250 * time.Millisecond
	// hostProbeInterval: how often suspects are probed again. A node whose speaker said
	// goodbye is withheld once a probe goes unanswered, so a node that shuts down loses
	// its endpoints at most this plus the timeout after it went.
	hostProbeInterval = 500 * time.Millisecond
	// kubeProxyHealthPort is kube-proxy's /healthz port, open on a node with a proxy.
	kubeProxyHealthPort = 10256
	// kubeletPort is the kubelet's API port (its Node's daemonEndpoints say so).
	kubeletPort = 10250
)

// newHostProber probes the memberlist port (unless 0: every speaker picked its own),
// kube-proxy's health port and the kubelet's, and calls changed when an answer changes.
func newHostProber(memberlistPort int, changed func()) *hostProber {
	ports := []probePort{{kubeProxyHealthPort, true}, {kubeletPort, true}}
	if memberlistPort != 0 && memberlistPort != kubeProxyHealthPort && memberlistPort != kubeletPort {
		ports = append(ports, probePort{memberlistPort, false})
	}
	return &hostProber{
		ports: ports, timeout: hostProbeTimeout, interval: hostProbeInterval,
		changed: changed, dial: dialAnswer,
		targets: map[string]netip.Addr{}, aliveAt: map[string]time.Time{}, silentAt: map[string]time.Time{},
		wake: make(chan struct{}, 1),
	}
}

// probeRequest is what a probe sends once connected to a port it asks: an HTTP request,
// which the health port answers, and the kubelet's TLS port refuses with a 400.
var probeRequest = []byte("GET /healthz HTTP/1.0\r\n\r\n")

// probePort is a port to probe; ask: send probeRequest once connected and wait for the
// answer (else only a refusal answers: memberlist logs an error for every stream it
// cannot decode, and says nothing useful back).
type probePort struct {
	port int
	ask  bool
}

// dialAnswer returns nil when the host answered: it refused the connection, or, with
// ask, its listener answered the request or closed the connection before ctx ended.
func dialAnswer(ctx context.Context, addr string, ask bool) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if !ask {
		return errors.New("accepted: no answer asked for")
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write(probeRequest); err != nil {
		return answeredWith(err)
	}
	_, err = c.Read(make([]byte, 1))
	return answeredWith(err)
}

// answeredWith says whether a read or write error after the connection came from a
// running listener (none, end of stream, reset) rather than from the timeout.
func answeredWith(err error) error {
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("accepted, then no answer: %w", err)
	}
	return nil
}

// set makes the nodes of targets the ones probed; a new one is probed at once.
func (p *hostProber) set(targets map[string]netip.Addr) {
	p.mu.Lock()
	fresh := false
	for n, a := range targets {
		if old, ok := p.targets[n]; !ok || old != a {
			fresh = true
		}
	}
	p.targets = targets
	for _, m := range []map[string]time.Time{p.aliveAt, p.silentAt} {
		for n := range m {
			if _, ok := targets[n]; !ok {
				delete(m, n)
			}
		}
	}
	p.mu.Unlock()
	if fresh {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// answers returns copies of when each target last answered and when a probe sent to
// it last went unanswered.
func (p *hostProber) answers() (aliveAt, silentAt map[string]time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	aliveAt, silentAt = make(map[string]time.Time, len(p.aliveAt)), make(map[string]time.Time, len(p.silentAt))
	for n, t := range p.aliveAt {
		aliveAt[n] = t
	}
	for n, t := range p.silentAt {
		silentAt[n] = t
	}
	return aliveAt, silentAt
}

// run probes the targets every interval, and at once when set adds one, until ctx
// ends.
func (p *hostProber) run(ctx context.Context) {
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-p.wake:
		}
		p.mu.Lock()
		targets := make(map[string]netip.Addr, len(p.targets))
		for n, a := range p.targets {
			targets[n] = a
		}
		p.mu.Unlock()
		p.round(ctx, targets)
	}
}

// round probes every target once, all at the same time, and records the outcomes.
func (p *hostProber) round(ctx context.Context, targets map[string]netip.Addr) {
	var wg sync.WaitGroup
	for node, addr := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			up := p.probe(ctx, addr)
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			_, wasAlive := p.aliveAt[node]
			_, wasSilent := p.silentAt[node]
			if _, still := p.targets[node]; !still {
				p.mu.Unlock()
				return
			}
			if up {
				p.aliveAt[node] = sent
				delete(p.silentAt, node)
			} else {
				p.silentAt[node] = sent
				delete(p.aliveAt, node)
			}
			p.mu.Unlock()
			if up != wasAlive || !up != wasSilent {
				p.changed()
			}
		}()
	}
	wg.Wait()
}

// probe says whether addr answered on any of the ports within the timeout.
func (p *hostProber) probe(ctx context.Context, addr netip.Addr) bool {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	answered := make(chan bool, len(p.ports))
	for _, pp := range p.ports {
		go func() {
			answered <- p.dial(ctx, net.JoinHostPort(addr.String(), strconv.Itoa(pp.port)), pp.ask) == nil
		}()
	}
	for range p.ports {
		if <-answered {
			return true
		}
	}
	return false
}
