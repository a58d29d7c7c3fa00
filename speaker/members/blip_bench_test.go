package members

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// BenchmarkBlipTolerance measures the other side of fast failure detection: how long a
// live member may go unheard before its peers declare it dead. In a cluster of
// HERALD_ML_NODES members (default 30; a list runs each size), a random member's
// every packet and connection is dropped for a blip (HERALD_ML_BLIPS_MS, default
// "200,300,400,500,600"), as if its link went down for that long while it ran on; it
// then has to hear that it is suspected and refute before the suspicion runs out. Each
// blip length is tried HERALD_ML_TRIALS times (default 10), and the benchmark reports
// in how many trials some peer declared the member dead (`dead-at-<ms>`), and in how
// many a member that was never cut off was declared dead by someone (`others-at-<ms>`:
// the cut member's own probes fail meanwhile, and its suspicions of its peers go out
// once it hears again), and in how many the members did not all hear each other again
// within 10 s and needed joins, as the speakers make every 2 s, to heal
// (`rejoined-at-<ms>`).
//
//	HERALD_ML_SUSPICION_MULT=0 HERALD_ML_NODES=30,100 HERALD_ML_TRIALS=8 go test -run '^$' -bench BenchmarkBlipTolerance -benchtime 1x -timeout 0 ./speaker/members/
func BenchmarkBlipTolerance(b *testing.B) {
	blips := envList(b, "HERALD_ML_BLIPS_MS", "200,300,400,500,600", 1)
	trials := envInt(b, "HERALD_ML_TRIALS", 10, 1)
	eachSize(b, func(b *testing.B, n int, cfg Config) {
		for b.Loop() {
			blipTrials(b, n, cfg, blips, trials)
		}
	})
}

func blipTrials(b *testing.B, n int, cfg Config, blips []int, trials int) {
	b.Logf("probe interval %v, suspicion mult %d, gossip interval %v", cfg.ProbeInterval, withExpected(cfg, n).suspicionMult(), withExpected(cfg, n).Gossip())
	ts := make([]*blipTransport, n)
	ms := scaleClusterWith(b, n, cfg, func(i int, c *Config) {
		t, err := newBlipTransport()
		if err != nil {
			b.Fatalf("transport of member %d: %v", i, err)
		}
		ts[i], c.Transport = t, t
	})
	time.Sleep(settleFor)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, ms0 := range blips {
		blip := time.Duration(ms0) * time.Millisecond
		dead, others, rejoined := 0, 0, 0
		for range trials {
			i := rng.IntN(n)
			victim := fmt.Sprintf("node%04d", i)
			// Start anywhere in the probe rounds.
			time.Sleep(time.Duration(rng.Int64N(int64(cfg.ProbeInterval * 10))))
			ts[i].blip(blip)
			lostVictim, lostOther := false, false
			for end := time.Now().Add(blip + 3*time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				for j, m := range ms {
					if j == i {
						continue
					}
					if !m.IsLive(victim) {
						lostVictim = true
					}
					if live := m.liveCount(); live < n-1 || (live == n-1 && m.IsLive(victim)) {
						lostOther = true
					}
				}
			}
			if lostVictim {
				dead++
			}
			if lostOther {
				others++
			}
			for end := time.Now().Add(10 * time.Second); !heardByAll(ms) && time.Now().Before(end); {
				time.Sleep(20 * time.Millisecond)
			}
			if !heardByAll(ms) {
				rejoined++
				rejoin(b, ms, time.Minute)
			}
			fmt.Fprintf(os.Stderr, "%d members, blip %v, %s: dead %v, another %v\n", n, blip, victim, lostVictim, lostOther) // progress: b.Logf prints only at the end
		}
		b.Logf("%d members, blip %v: declared dead in %d of %d trials, another member in %d; %d needed the speakers' joins to heal",
			n, blip, dead, trials, others, rejoined)
		b.ReportMetric(float64(dead), fmt.Sprintf("dead-at-%dms", ms0))
		b.ReportMetric(float64(others), fmt.Sprintf("others-at-%dms", ms0))
		b.ReportMetric(float64(rejoined), fmt.Sprintf("rejoined-at-%dms", ms0))
	}
	b.ReportMetric(0, "ns/op")
}

// heardByAll says whether every member of ms hears every other.
func heardByAll(ms []*Members) bool {
	for _, m := range ms {
		if m.liveCount() != len(ms) {
			return false
		}
	}
	return true
}

// rejoin heals ms as the speakers do (every --ml-join-interval, 2 s, a speaker joins
// the Nodes whose speaker it does not hear): a member that declared its peers dead
// while it heard nobody, and whom they declared dead, may otherwise stay apart, since
// memberlist gossips and pushes its state only to members it holds alive. It fails b
// if ms are not whole again within deadline.
func rejoin(b *testing.B, ms []*Members, deadline time.Duration) {
	b.Helper()
	addrs := make([]string, len(ms))
	for i, m := range ms {
		addrs[i] = m.Addr()
	}
	for end := time.Now().Add(deadline); !heardByAll(ms); time.Sleep(2 * time.Second) {
		if time.Now().After(end) {
			b.Fatalf("after %v and joins every 2 s, the members do not all hear each other", deadline)
		}
		for _, m := range ms {
			_, _ = m.Join(addrs) // Join skips the members m hears
		}
	}
}

// envList is the comma-separated integers in the environment variable name (def when
// it is unset); a value below least fails the benchmark.
func envList(b *testing.B, name, def string, least int) []int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		s = def
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < least {
			b.Fatalf("%s=%q: want integers of %d or more, comma-separated", name, s, least)
		}
		out = append(out, v)
	}
	return out
}

// blipTransport is memberlist's own transport with a switch: while it is blipped,
// every packet and connection to or from the member is dropped, as if its link were
// down, while the member runs on (and its own probes fail, as behind a dead link).
type blipTransport struct {
	*memberlist.NetTransport
	until   atomic.Int64 // UnixNano before which everything is dropped
	packets chan *memberlist.Packet
	streams chan net.Conn
	// closing stops the deliveries to memberlist, done the forwarders: between the
	// two, memberlist's own transport shuts down, and its listeners must not block on
	// a packet nobody takes.
	closing, done chan struct{}
}

var errBlipped = errors.New("blipped: the link is down")

// newBlipTransport binds a free loopback port for UDP and TCP.
func newBlipTransport() (*blipTransport, error) {
	nt, err := loopbackTransport()
	if err != nil {
		return nil, err
	}
	t := &blipTransport{NetTransport: nt, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn),
		closing: make(chan struct{}), done: make(chan struct{})}
	go forward(t, nt.PacketCh(), t.packets, func(*memberlist.Packet) {})
	go forward(t, nt.StreamCh(), t.streams, func(c net.Conn) { _ = c.Close() })
	return t, nil
}

// forward passes what arrives on in to out, and drops it (after discard) while t is
// blipped or closing.
func forward[T any](t *blipTransport, in <-chan T, out chan<- T, discard func(T)) {
	for {
		select {
		case v := <-in:
			if t.down() {
				discard(v)
				continue
			}
			select {
			case out <- v:
			case <-t.closing:
				discard(v)
			}
		case <-t.done:
			return
		}
	}
}

// liveCount is how many members m hears, itself included.
func (m *Members) liveCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

func (t *blipTransport) blip(d time.Duration) { t.until.Store(time.Now().Add(d).UnixNano()) }
func (t *blipTransport) down() bool           { return time.Now().UnixNano() < t.until.Load() }

func (t *blipTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }
func (t *blipTransport) StreamCh() <-chan net.Conn           { return t.streams }

func (t *blipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *blipTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.down() {
		return time.Now(), nil // lost on the way, as UDP is
	}
	return t.NetTransport.WriteToAddress(b, a)
}

func (t *blipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *blipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.down() {
		return nil, errBlipped
	}
	return t.NetTransport.DialAddressTimeout(a, timeout)
}

func (t *blipTransport) Shutdown() error {
	close(t.closing)
	err := t.NetTransport.Shutdown()
	close(t.done)
	return err
}

var _ memberlist.NodeAwareTransport = (*blipTransport)(nil)
