package speaker

import (
	"strings"
	"testing"
	"time"
)

func TestConfigStallAfterBelowEarliestVerdict(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.NodeName, c.Namespace = "worker", "herald-system"
		return c
	}
	defaults := valid()
	if _, err := defaults.validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	if defaults.StallAfter >= defaults.Members.EarliestVerdict() {
		t.Fatalf("default --stall-after %v is not below memberlist's earliest verdict %v", defaults.StallAfter, defaults.Members.EarliestVerdict())
	}
	for _, tc := range []struct {
		name    string
		change  func(*Config)
		wantErr string
	}{
		{"faster probes without a shorter stall", func(c *Config) {
			c.Members.ProbeInterval = 50 * time.Millisecond
			c.Members.ProbeTimeout = 20 * time.Millisecond
		},
			"--stall-after 400ms must be shorter than 250ms"},
		{"stall as long as the earliest verdict", func(c *Config) { c.StallAfter = c.Members.EarliestVerdict() }, "--stall-after 500ms must be shorter than 500ms"},
		{"the automatic suspicion multiplier", func(c *Config) { c.Members.SuspicionMult = 0 }, ""},
		{"a fixed suspicion multiplier of 2", func(c *Config) { c.Members.SuspicionMult = 2 }, "--stall-after 400ms must be shorter than 300ms"},
		{"negative stall", func(c *Config) { c.StallAfter = -time.Second }, "--stall-after -1s must not be negative"},
		{"no answers", func(c *Config) { c.ReplyRate = 0 }, "--reply-rate 0 and --reply-burst 1000 must be positive"},
		{"watchdog off", func(c *Config) {
			c.StallAfter = 0
			c.Members.ProbeInterval = 50 * time.Millisecond
			c.Members.ProbeTimeout = 20 * time.Millisecond
		}, ""},
		{"coalescing off", func(c *Config) { c.Records.Coalesce = 0 }, ""},
		{"negative coalescing", func(c *Config) { c.Records.Coalesce = -time.Millisecond }, "--record-coalesce -1ms must not be negative"},
		{"coalescing past half of Grace", func(c *Config) { c.Records.Coalesce = 600 * time.Millisecond },
			"--record-coalesce 600ms must be at most half of --quorum-grace 1s"},
		{"the records digest from a negative count", func(c *Config) { c.Records.DigestFrom = -1 }, "--records-digest-from -1 must be 0 (never) or more"},
		{"coalescing and the digest's gap past half of Grace", func(c *Config) { c.Records.Coalesce = 400 * time.Millisecond },
			"--record-coalesce 400ms plus the records digest's 200ms between writes must be at most half of --quorum-grace 1s"},
		{"the same coalescing without the digest", func(c *Config) {
			c.Records.Coalesce = 400 * time.Millisecond
			c.Records.DigestFrom = 0
		}, ""},
		{"slower probes", func(c *Config) {
			c.Members.ProbeInterval = time.Second
			c.Members.ProbeTimeout = 500 * time.Millisecond
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.change(&c)
			_, err := c.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("accepted; want an error with %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("error %q; want it to say %q", err, tc.wantErr)
			}
		})
	}
}

// TestEndpointsListenOnTheNodeIP: an address without host becomes the node's, in
// either family; one with a host, or "0" (off), stays.
func TestEndpointsListenOnTheNodeIP(t *testing.T) {
	for _, c := range []struct{ addr, nodeIP, want string }{
		{":7474", "172.18.0.3", "172.18.0.3:7474"},
		{":7475", "fd00::3", "[fd00::3]:7475"},
		{"0.0.0.0:7474", "172.18.0.3", "0.0.0.0:7474"},
		{"127.0.0.1:7474", "172.18.0.3", "127.0.0.1:7474"},
		{"0", "172.18.0.3", "0"},
		{":7474", "", ":7474"},
	} {
		if got := onNodeIP(c.addr, c.nodeIP); got != c.want {
			t.Errorf("onNodeIP(%q, %q) = %q, want %q", c.addr, c.nodeIP, got, c.want)
		}
	}
}
