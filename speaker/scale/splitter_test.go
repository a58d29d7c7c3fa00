package scale

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/controllers"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
)

// splitter cuts the simulated speakers' memberlists into two sides, as a switch
// between two racks would: while it is on, nothing a member sends reaches a member of
// the other side (packets are lost, connections refused), and the API server stays
// reachable from both. Each member's transport filters what it sends; both sides
// filtering, nothing crosses either way.
type splitter struct {
	on atomic.Bool
	// side says which side a node is on (false or true).
	side func(node string) bool

	mu     sync.Mutex
	byPort map[int]string // the node bound to each loopback port
}

func newSplitter(side func(node string) bool) *splitter {
	return &splitter{side: side, byPort: map[int]string{}}
}

// transport binds node's memberlist to 127.0.0.1:port (0: any free port).
func (sp *splitter) transport(node string, port int) (memberlist.NodeAwareTransport, error) {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{"127.0.0.1"},
		BindPort:  port,
		Logger:    log.New(io.Discard, "", 0),
	})
	if err != nil {
		return nil, err
	}
	sp.mu.Lock()
	sp.byPort[nt.GetAutoBindPort()] = node
	sp.mu.Unlock()
	return &splitTransport{NetTransport: nt, sp: sp, node: node}, nil
}

// cut says whether node may not reach addr now.
func (sp *splitter) cut(node, addr string) bool {
	if !sp.on.Load() {
		return false
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return false
	}
	sp.mu.Lock()
	peer, ok := sp.byPort[port]
	sp.mu.Unlock()
	return ok && sp.side(peer) != sp.side(node)
}

// splitTransport is memberlist's own transport whose sends to the other side are
// lost while the splitter is on.
type splitTransport struct {
	*memberlist.NetTransport
	sp   *splitter
	node string
}

var errSplit = errors.New("split: the other side is unreachable")

func (t *splitTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *splitTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.sp.cut(t.node, a.Addr) {
		return time.Now(), nil // lost on the way, as UDP is
	}
	return t.NetTransport.WriteToAddress(b, a)
}

func (t *splitTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *splitTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.sp.cut(t.node, a.Addr) {
		return nil, errSplit
	}
	return t.NetTransport.DialAddressTimeout(a, timeout)
}

var _ memberlist.NodeAwareTransport = (*splitTransport)(nil)

// startDigester runs herald's controller's records digest for the speakers of
// namespace until ctx ends.
func startDigester(tb testing.TB, ctx context.Context, env *testenv.Env, namespace string) {
	tb.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		tb.Fatal(err)
	}
	d := &controllers.RecordDigester{Watch: wc, API: env.Client, Client: env.Client, Namespace: namespace, Log: logr.Discard()}
	go func() { _ = d.Start(ctx) }()
}

// startSummarizer runs herald's controller's heartbeat summary for the speakers of
// namespace, with a cache of the heartbeats as the controller's, until ctx ends.
func startSummarizer(tb testing.TB, ctx context.Context, env *testenv.Env, namespace string) {
	tb.Helper()
	cc, err := cache.New(env.Config, cache.Options{Scheme: scheme.New(), ByObject: map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: controllers.HeartbeatLeases(namespace)}})
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = cc.Start(ctx) }()
	sum := &controllers.HeartbeatSummarizer{Cache: cc, API: env.Client, Client: env.Client, Namespace: namespace, Log: logr.Discard()}
	go func() { _ = sum.Start(ctx) }()
}
