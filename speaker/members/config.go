package members

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/spf13/pflag"

	"herald.dev/herald/internal/memberkey"
)

// ErrNoKey is returned (wrapped) by Validate and Start when no encryption key is set.
var ErrNoKey = errors.New("memberlist encryption key is missing")

// DefaultBindPort is memberlist's customary port, used for both TCP and UDP.
const DefaultBindPort = 7946

// DefaultKeyFile is where the speaker's Pod mounts the memberlist Secret.
const DefaultKeyFile = "/etc/herald/memberlist/" + memberkey.DataKey

// Config is what Start needs. Build it with DefaultConfig and override fields; the
// failure-detection fields map one to one onto memberlist.Config.
type Config struct {
	// NodeName is this member's name; it must equal the Kubernetes Node name, since
	// the election matches live members against Nodes by name. Required.
	NodeName string
	// BindAddr is the node's IP (status.hostIP / status.podIP under hostNetwork).
	// Required; the unspecified address is refused so peers get a routable address.
	BindAddr string
	// BindPort is the TCP and UDP port (default 7946). 0 picks a free port (tests).
	BindPort int
	// KeyFile is the mounted memberlist Secret file read by LoadKey
	// (default DefaultKeyFile).
	KeyFile string
	// SecretKey is the AES key (16, 24 or 32 bytes; memberkey.FromSecretData gives 32).
	// Required: encryption is mandatory, there is no plain-text cluster.
	SecretKey []byte
	// OtherKeys are further keys accepted from peers but not sent with: a key being
	// rotated in or out (each 16, 24 or 32 bytes).
	OtherKeys [][]byte

	// ProbeInterval is the time between two failure probes, each of the next peer
	// in a shuffled round (default 100 ms; memberlist LAN: 1 s).
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct UDP ping waits for its ack before the indirect
	// probes start (default 50 ms; LAN: 500 ms). Must be below ProbeInterval. A LAN
	// round trip is well under a millisecond, so 50 ms leaves a large margin.
	ProbeTimeout time.Duration
	// SuspicionMult scales the suspicion timeout: a suspected member is declared dead
	// after SuspicionMult × max(1, log10(n)) × ProbeInterval unless it refutes (4 →
	// 400 ms below 10 members, 1.2 s at 1,000; LAN: 4, with 1 s probes). 0, the
	// default, chooses it at Start from ExpectedMembers (SuspicionMultFor: 4 below 22
	// members, 3 below 100, 2 below 10,000), so that the suspicion does not grow with
	// the cluster: 400 to 600 ms at any size, the tolerance of a small cluster.
	SuspicionMult int
	// ExpectedMembers is how many members the cluster is expected to hold, this one
	// included (the speaker counts its peers' heartbeats); only an automatic
	// SuspicionMult reads it. Counting too few only lengthens the suspicion.
	ExpectedMembers int
	// SuspicionMaxTimeoutMult: a suspicion starts at this many times the minimum and
	// shrinks to it as SuspicionMult−2 other members confirm it (default 1: always
	// the minimum, nothing awaited; LAN: 6).
	SuspicionMaxTimeoutMult int
	// IndirectChecks is the number of members asked to ping a member that missed
	// its direct ping (default 3, as LAN).
	IndirectChecks int
	// GossipInterval is the gossip period; suspicion, refutation and death news
	// spread at this pace, log n rounds to reach every member (LAN: 200 ms). 0, the
	// default, is 100 ms while the suspicion multiplier is 4 or more, and 30 ms when
	// it is lower (the automatic one from 22 members on): a shorter suspicion needs
	// the refutation's rounds to be shorter too. A member gossips only when it has
	// news, so a shorter period costs a quiet cluster nothing and sends each piece of
	// news no more often; but the news leaves a member within fewer milliseconds,
	// and a member cut off for longer than that loses all of it.
	GossipInterval time.Duration
	// RetransmitMult: each gossip message is sent RetransmitMult × ceil(log10(n+1))
	// times (default 4, as LAN).
	RetransmitMult int
	// PushPullInterval is the period of full state syncs over TCP, which heal missed
	// gossip and partitions; 0 disables them (default 30 s, as LAN).
	PushPullInterval time.Duration
	// TCPTimeout bounds TCP connections (join, push/pull, fallback ping). A join
	// attempt to an unreachable peer blocks this long (default 3 s; LAN: 10 s).
	TCPTimeout time.Duration

	// Transport, when set, replaces memberlist's own UDP and TCP transport: tests and
	// benchmarks that make a member deaf and mute for a while, or cut members apart.
	// No flag sets it.
	Transport memberlist.Transport
	// noStateExchange: a member that sees a peer join sends it nothing (benchmarks
	// of memberlist's own detection at sizes whose joins' state exchanges one process
	// cannot hold; nothing of it runs while a member is declared dead).
	noStateExchange bool
}

// DefaultConfig returns the defaults, tuned for sub-second failure detection on a LAN.
//
// Each member probes one peer per ProbeInterval, going round its peers, so a member
// that dies is probed by a given survivor within n−1 intervals (two in a three-node
// cluster; sooner by one of several survivors). The direct ping times out after
// ProbeTimeout, the indirect and TCP probes give up at the end of that interval, and
// the prober suspects the member. The suspicion timeout is
// SuspicionMult × max(1, log10(n)) × ProbeInterval = 4 × 1 × 100 ms = 400 ms for
// n < 10 (the automatic multiplier, SuspicionMult 0, the default, keeps it at 400 to
// 600 ms at any size; a fixed 4 grows it to 800 ms at 100, 1.2 s at 1,000);
// SuspicionMaxTimeoutMult 1 makes it always that minimum rather than waiting for
// other members to confirm the suspicion (in small clusters there are none to wait
// for). Dead is gossiped in a few
// GossipIntervals. In a three-node cluster: 0–200 ms until probed + 100 ms probe +
// 400 ms suspicion, measured by BenchmarkFailureDetection (docs/scale.md).
//
// False positives: a live member is declared dead only if it misses the direct
// ping, all IndirectChecks indirect pings and the TCP fallback ping of one probe
// interval, and then cannot refute the suspicion within 400 ms (the suspicion must
// reach it and its refutation come back: log n rounds of gossip each way, which is
// why gossip speeds up where the suspicion is shortened for the size). That takes a
// member unheard for roughly 300 to 400 ms or more, at any size (a long
// CPU-starvation pause, a saturated or dead link; BenchmarkBlipTolerance measures
// the same at 5 members with a multiplier of 4 as at 100 with the automatic one);
// memberlist's awareness (Lifeguard) also lengthens timeouts when the local node
// itself is slow. A falsely dead member refutes as soon as it hears of it and comes
// back, which moves its VIPs away and back (one flap). Clusters that prefer
// stability over speed raise --ml-suspicion-mult (memberlist's LAN behaviour is
// probes every second and a multiplier of 4: 4 s of suspicion); a fixed multiplier
// of 4 gives large clusters memberlist's longer suspicion (0.8 s at 100, 1.2 s at
// 1,000).
func DefaultConfig() Config {
	return Config{
		BindPort:                DefaultBindPort,
		KeyFile:                 DefaultKeyFile,
		ProbeInterval:           100 * time.Millisecond,
		ProbeTimeout:            50 * time.Millisecond,
		SuspicionMult:           0, // SuspicionMultFor(ExpectedMembers)
		SuspicionMaxTimeoutMult: 1,
		IndirectChecks:          3,
		GossipInterval:          0, // Gossip()
		RetransmitMult:          4,
		PushPullInterval:        30 * time.Second,
		TCPTimeout:              3 * time.Second,
	}
}

// suspicionIntervals is the suspicion, in probe intervals, that an automatic
// SuspicionMult keeps at every size, as memberlist's formula gives it to clusters
// below 10 members with a multiplier of 4.
const suspicionIntervals = 4

// SuspicionMultFor is the multiplier an automatic SuspicionMult takes with n members
// expected: the smallest that keeps memberlist's suspicion, SuspicionMult ×
// max(1, log10 n) probe intervals, at suspicionIntervals or more. The suspicion then
// stays between 4 and 4 + log10 n intervals at the size counted (400 ms below 10
// members, 400 ms at 100, 500 ms at 300, 600 ms at 1,000 with 100 ms probes), where a
// fixed multiplier of 4 grows it to 1.2 s at 1,000. Why a shorter suspicion holds at
// size: a suspected member refutes once the suspicion has reached it and its answer
// has come back, log n rounds of gossip each way (docs/scale.md measures how long a
// member may go unheard before it is called dead, by size).
func SuspicionMultFor(n int) int {
	return int(math.Ceil(suspicionIntervals/sizeScale(n) - 1e-9)) // the epsilon: 4/log10(10,000) is 1, not a hair above
}

// sizeScale is memberlist's factor of the suspicion for n members, max(1, log10 n).
func sizeScale(n int) float64 { return max(1, math.Log10(float64(max(n, 1)))) }

// suspicionMult is the multiplier Start gives memberlist.
func (c Config) suspicionMult() int {
	if c.SuspicionMult == 0 {
		return SuspicionMultFor(c.ExpectedMembers)
	}
	return c.SuspicionMult
}

// Gossip intervals of an automatic GossipInterval: slow while the suspicion has a
// small cluster's length or more, fast when it was shortened for the size.
const (
	slowGossip = 100 * time.Millisecond
	fastGossip = 30 * time.Millisecond
)

// Gossip is the gossip period Start gives memberlist.
func (c Config) Gossip() time.Duration {
	switch {
	case c.GossipInterval > 0:
		return c.GossipInterval
	case c.suspicionMult() >= suspicionIntervals:
		return slowGossip
	default:
		return fastGossip
	}
}

// Suspicion is how long memberlist lets a suspected member refute in a cluster of
// ExpectedMembers members (for the logs: memberlist computes it again at each
// suspicion, with the members it knows then).
func (c Config) Suspicion() time.Duration {
	return time.Duration(float64(c.suspicionMult()) * sizeScale(c.ExpectedMembers) * float64(c.ProbeInterval))
}

// EarliestVerdict is the shortest time after which peers may declare a member that
// went silent dead: one probe interval of failed probing, then the shortest suspicion
// (SuspicionMult × ProbeInterval; larger clusters and confirmations only lengthen it).
// With an automatic SuspicionMult the suspicion is never shorter than
// suspicionIntervals probe intervals as long as the cluster holds at least the
// smallest size that gives the multiplier chosen at Start (22 members for 3, 100 for
// 2, 10,000 for 1). A speaker must notice its own stall before that (--stall-after).
func (c Config) EarliestVerdict() time.Duration {
	if c.SuspicionMult == 0 {
		return c.ProbeInterval * (1 + suspicionIntervals)
	}
	return c.ProbeInterval * time.Duration(1+c.SuspicionMult)
}

// AddFlags registers the --ml-* flags on fs, with c's current values as defaults.
// NodeName and SecretKey have no flag: the speaker takes the first from its Node
// name and the second from KeyFile (LoadKey).
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.BindAddr, "ml-bind-addr", c.BindAddr, "memberlist: the node's IP to bind and advertise (usually from status.hostIP)")
	fs.IntVar(&c.BindPort, "ml-bind-port", c.BindPort, "memberlist: TCP and UDP port")
	fs.StringVar(&c.KeyFile, "ml-secret-key-path", c.KeyFile, "memberlist: file holding the encryption key (the mounted memberlist Secret)")
	fs.DurationVar(&c.ProbeInterval, "ml-probe-interval", c.ProbeInterval, "memberlist: time between failure probes")
	fs.DurationVar(&c.ProbeTimeout, "ml-probe-timeout", c.ProbeTimeout, "memberlist: wait for a direct ping's ack before indirect probes")
	fs.IntVar(&c.SuspicionMult, "ml-suspicion-mult", c.SuspicionMult, "memberlist: suspicion timeout = mult x max(1, log10(n)) x probe interval (0: chosen at start from the speakers counted, so that the suspicion stays 4 to 4+log10(n) probe intervals at any size)")
	fs.IntVar(&c.SuspicionMaxTimeoutMult, "ml-suspicion-max-timeout-mult", c.SuspicionMaxTimeoutMult, "memberlist: upper bound of the suspicion timeout, in multiples of its minimum")
	fs.IntVar(&c.IndirectChecks, "ml-indirect-checks", c.IndirectChecks, "memberlist: members asked to ping a member that missed a direct ping")
	fs.DurationVar(&c.GossipInterval, "ml-gossip-interval", c.GossipInterval, "memberlist: gossip period (0: 100ms, or 30ms when the suspicion multiplier is below 4)")
	fs.IntVar(&c.RetransmitMult, "ml-retransmit-mult", c.RetransmitMult, "memberlist: gossip retransmissions = mult x ceil(log10(n+1))")
	fs.DurationVar(&c.PushPullInterval, "ml-push-pull-interval", c.PushPullInterval, "memberlist: full state sync period (0 disables)")
	fs.DurationVar(&c.TCPTimeout, "ml-tcp-timeout", c.TCPTimeout, "memberlist: timeout of TCP connections (join, push/pull)")
}

// Validate reports every invalid field, joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.NodeName == "" {
		bad("memberlist node name is empty (it must be the Node name)")
	}
	if a, err := netip.ParseAddr(c.BindAddr); err != nil {
		bad("--ml-bind-addr %q is not an IP address (it must be the node's IP)", c.BindAddr)
	} else if a.IsUnspecified() {
		bad("--ml-bind-addr %s is unspecified (it must be the node's IP)", c.BindAddr)
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		bad("--ml-bind-port %d is out of range 0-65535", c.BindPort)
	}
	switch len(c.SecretKey) {
	case 16, 24, 32:
	case 0:
		errs = append(errs, fmt.Errorf("%w: encryption is mandatory (see --ml-secret-key-path)", ErrNoKey))
	default:
		bad("memberlist encryption key is %d bytes, want 16, 24 or 32", len(c.SecretKey))
	}
	for _, k := range c.OtherKeys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			bad("a secondary memberlist key is %d bytes, want 16, 24 or 32", n)
		}
	}
	positive := func(flag string, d time.Duration) {
		if d <= 0 {
			bad("--%s %v must be positive", flag, d)
		}
	}
	positive("ml-probe-interval", c.ProbeInterval)
	positive("ml-probe-timeout", c.ProbeTimeout)
	positive("ml-tcp-timeout", c.TCPTimeout)
	if c.ProbeTimeout > 0 && c.ProbeInterval > 0 && c.ProbeTimeout >= c.ProbeInterval {
		bad("--ml-probe-timeout %v must be shorter than --ml-probe-interval %v", c.ProbeTimeout, c.ProbeInterval)
	}
	if c.GossipInterval < 0 {
		bad("--ml-gossip-interval %v must not be negative (0: automatic)", c.GossipInterval)
	}
	if c.PushPullInterval < 0 {
		bad("--ml-push-pull-interval %v must not be negative (0 disables)", c.PushPullInterval)
	}
	atLeast := func(flag string, v, min int) {
		if v < min {
			bad("--%s %d must be at least %d", flag, v, min)
		}
	}
	atLeast("ml-suspicion-mult", c.SuspicionMult, 0)
	atLeast("ml-suspicion-max-timeout-mult", c.SuspicionMaxTimeoutMult, 1)
	atLeast("ml-indirect-checks", c.IndirectChecks, 0)
	atLeast("ml-retransmit-mult", c.RetransmitMult, 1)
	return errors.Join(errs...)
}
