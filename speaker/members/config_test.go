package members

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestConfigValidate(t *testing.T) {
	valid := func() Config { return testConfig("node1", testKey) }
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want []string // substrings of the error; none: valid
	}{
		{"defaults with name, address and key", func(*Config) {}, nil},
		{"IPv6 address", func(c *Config) { c.BindAddr = "fd00::1" }, nil},
		{"AES-128 key", func(c *Config) { c.SecretKey = make([]byte, 16) }, nil},
		{"push/pull disabled", func(c *Config) { c.PushPullInterval = 0 }, nil},
		{"no name", func(c *Config) { c.NodeName = "" }, []string{"node name is empty"}},
		{"no address", func(c *Config) { c.BindAddr = "" }, []string{"--ml-bind-addr"}},
		{"host name", func(c *Config) { c.BindAddr = "node1.local" }, []string{"not an IP address"}},
		{"unspecified", func(c *Config) { c.BindAddr = "0.0.0.0" }, []string{"unspecified"}},
		{"port too large", func(c *Config) { c.BindPort = 70000 }, []string{"--ml-bind-port 70000"}},
		{"negative port", func(c *Config) { c.BindPort = -1 }, []string{"--ml-bind-port -1"}},
		{"no key", func(c *Config) { c.SecretKey = nil }, []string{"key is missing", "mandatory"}},
		{"bad key length", func(c *Config) { c.SecretKey = make([]byte, 20) }, []string{"20 bytes"}},
		{"zero probe interval", func(c *Config) { c.ProbeInterval = 0 }, []string{"--ml-probe-interval 0s must be positive"}},
		{"timeout not below interval", func(c *Config) { c.ProbeTimeout = c.ProbeInterval }, []string{"--ml-probe-timeout 100ms must be shorter"}},
		{"automatic gossip interval", func(c *Config) { c.GossipInterval = 0 }, nil},
		{"negative gossip interval", func(c *Config) { c.GossipInterval = -time.Second }, []string{"--ml-gossip-interval -1s must not be negative"}},
		{"zero TCP timeout", func(c *Config) { c.TCPTimeout = 0 }, []string{"--ml-tcp-timeout"}},
		{"negative push/pull", func(c *Config) { c.PushPullInterval = -time.Second }, []string{"--ml-push-pull-interval"}},
		{"automatic suspicion mult", func(c *Config) { c.SuspicionMult = 0 }, nil},
		{"negative suspicion mult", func(c *Config) { c.SuspicionMult = -1 }, []string{"--ml-suspicion-mult -1 must be at least 0"}},
		{"zero max timeout mult", func(c *Config) { c.SuspicionMaxTimeoutMult = 0 }, []string{"--ml-suspicion-max-timeout-mult"}},
		{"negative indirect checks", func(c *Config) { c.IndirectChecks = -1 }, []string{"--ml-indirect-checks"}},
		{"zero retransmit mult", func(c *Config) { c.RetransmitMult = 0 }, []string{"--ml-retransmit-mult"}},
		{"several errors at once", func(c *Config) { c.NodeName = ""; c.SecretKey = nil },
			[]string{"node name", "key is missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mod(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, missing %q", err, w)
				}
			}
		})
	}
}

func TestDefaultConfigIsSubSecond(t *testing.T) {
	c := DefaultConfig()
	if c.BindPort != 7946 {
		t.Errorf("BindPort = %d, want 7946", c.BindPort)
	}
	// Theory for three members, the smallest cluster with a majority after a death:
	// each survivor probes its two peers in turn, so the dead one waits up to two
	// probe intervals to be probed, one more interval of probing, then the suspicion
	// timeout (the minimum: nothing is awaited with SuspicionMaxTimeoutMult 1), then
	// one gossip interval to spread.
	if c.SuspicionMaxTimeoutMult != 1 {
		t.Errorf("SuspicionMaxTimeoutMult = %d: a suspicion would wait for confirmations that a small cluster cannot give", c.SuspicionMaxTimeoutMult)
	}
	suspicion := time.Duration(c.suspicionMult()) * c.ProbeInterval
	worst := 3*c.ProbeInterval + suspicion + c.Gossip()
	if worst >= time.Second {
		t.Errorf("default worst-case detection %v is not sub-second", worst)
	}
	t.Logf("default detection in theory (3 members): %v–%v", c.EarliestVerdict(), worst)
}

// The automatic multiplier keeps memberlist's suspicion, mult × max(1, log10 n)
// probe intervals, at 4 intervals or a little more whatever the size, where a fixed
// 4 grows it with log10 n.
func TestSuspicionMultFor(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 4}, {1, 4}, {3, 4}, {9, 4}, {10, 4}, {11, 4}, {30, 3}, {99, 3},
		{100, 2}, {300, 2}, {999, 2}, {1000, 2}, {9999, 2}, {10000, 1}, {100000, 1},
	} {
		got := SuspicionMultFor(tc.n)
		if got != tc.want {
			t.Errorf("SuspicionMultFor(%d) = %d, want %d", tc.n, got, tc.want)
		}
		scale := max(1, math.Log10(float64(max(tc.n, 1))))
		if intervals := float64(got) * scale; intervals < suspicionIntervals-1e-9 || intervals >= suspicionIntervals+scale {
			t.Errorf("SuspicionMultFor(%d) = %d: a suspicion of %.2f probe intervals, want [%d, %.2f)", tc.n, got, intervals, suspicionIntervals, suspicionIntervals+scale)
		}
	}
	c := DefaultConfig()
	c.SuspicionMult, c.ExpectedMembers = 0, 1000
	if got := c.suspicionMult(); got != 2 {
		t.Errorf("automatic multiplier with 1,000 members expected = %d, want 2", got)
	}
	// Gossip speeds up where the suspicion was shortened for the size, so that a
	// refutation's rounds fit in it.
	if got := c.Gossip(); got != 30*time.Millisecond {
		t.Errorf("automatic gossip with 1,000 members expected = %v, want 30ms", got)
	}
	c.SuspicionMult = 5
	if got := c.suspicionMult(); got != 5 {
		t.Errorf("a multiplier set by flag is %d once resolved, want 5", got)
	}
	if got := c.Gossip(); got != 100*time.Millisecond {
		t.Errorf("automatic gossip with a multiplier of 5 = %v, want 100ms", got)
	}
	c.GossipInterval = 70 * time.Millisecond
	if got := c.Gossip(); got != 70*time.Millisecond {
		t.Errorf("a gossip interval set by flag is %v once resolved, want 70ms", got)
	}
	small := DefaultConfig()
	small.SuspicionMult, small.ExpectedMembers = 0, 5
	if small.suspicionMult() != 4 || small.Gossip() != 100*time.Millisecond {
		t.Errorf("5 members: multiplier %d, gossip %v; want 4 and 100ms, as with the defaults", small.suspicionMult(), small.Gossip())
	}
	if d := DefaultConfig(); d.suspicionMult() != 4 || d.Gossip() != 100*time.Millisecond {
		t.Errorf("defaults: multiplier %d, gossip %v; want 4 and 100ms", d.suspicionMult(), d.Gossip())
	}
}

func TestAddFlags(t *testing.T) {
	c := DefaultConfig()
	fs := pflag.NewFlagSet("speaker", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse([]string{
		"--ml-bind-addr=10.0.0.5", "--ml-bind-port=8000", "--ml-secret-key-path=/k",
		"--ml-probe-interval=1s", "--ml-probe-timeout=500ms", "--ml-suspicion-mult=4",
		"--ml-suspicion-max-timeout-mult=6", "--ml-indirect-checks=2", "--ml-gossip-interval=200ms",
		"--ml-retransmit-mult=3", "--ml-push-pull-interval=0", "--ml-tcp-timeout=10s",
	}); err != nil {
		t.Fatal(err)
	}
	want := Config{BindAddr: "10.0.0.5", BindPort: 8000, KeyFile: "/k",
		ProbeInterval: time.Second, ProbeTimeout: 500 * time.Millisecond, SuspicionMult: 4,
		SuspicionMaxTimeoutMult: 6, IndirectChecks: 2, GossipInterval: 200 * time.Millisecond,
		RetransmitMult: 3, PushPullInterval: 0, TCPTimeout: 10 * time.Second}
	if c.BindAddr != want.BindAddr || c.BindPort != want.BindPort || c.KeyFile != want.KeyFile ||
		c.ProbeInterval != want.ProbeInterval || c.ProbeTimeout != want.ProbeTimeout ||
		c.SuspicionMult != want.SuspicionMult || c.SuspicionMaxTimeoutMult != want.SuspicionMaxTimeoutMult ||
		c.IndirectChecks != want.IndirectChecks || c.GossipInterval != want.GossipInterval ||
		c.RetransmitMult != want.RetransmitMult || c.PushPullInterval != want.PushPullInterval ||
		c.TCPTimeout != want.TCPTimeout {
		t.Errorf("after flags: %+v\nwant %+v", c, want)
	}
	// Unset flags keep the defaults.
	d := DefaultConfig()
	fs2 := pflag.NewFlagSet("speaker", pflag.ContinueOnError)
	d.AddFlags(fs2)
	if err := fs2.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if d.ProbeInterval != 100*time.Millisecond || d.BindPort != DefaultBindPort || d.KeyFile != DefaultKeyFile {
		t.Errorf("defaults changed by AddFlags: %+v", d)
	}
}
