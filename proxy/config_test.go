package proxy

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestConfigFlags(t *testing.T) {
	c := DefaultConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	err := fs.Parse([]string{"--proxy=iptables", "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
		"--masquerade-bit=12", "--nodeport-addresses=192.168.0.0/24,primary",
		"--iptables-min-sync-period=250ms", "--iptables-sync-period=10m", "--healthz-bind-address=127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	c.NodeName, c.NodeIPs = "n1", []netip.Addr{netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("fd00::2")}
	s, err := c.parse(true)
	if err != nil {
		t.Fatal(err)
	}
	if c.MasqueradeBit != 12 || c.MinSyncPeriod != 250*time.Millisecond || c.SyncPeriod != 10*time.Minute {
		t.Errorf("config %+v", c)
	}
	if s.healthzAddr != "127.0.0.1:10256" {
		t.Errorf("healthz address %q", s.healthzAddr)
	}
	if got := len(s.podCIDRs); got != 2 {
		t.Errorf("pod CIDRs %v", s.podCIDRs)
	}
	want := []string{"192.168.0.0/24", "192.168.0.2/32", "fd00::2/128"}
	if len(s.nodePortAddresses) != len(want) {
		t.Fatalf("nodeport addresses %v, want %v", s.nodePortAddresses, want)
	}
	for i, p := range s.nodePortAddresses {
		if p.String() != want[i] {
			t.Errorf("nodeport address %d = %s, want %s", i, p, want[i])
		}
	}
	if err := fs.Parse([]string{"--proxy=ipvs"}); err == nil {
		t.Error("--proxy=ipvs accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.NodeName, c.NodeIPs = "n1", []netip.Addr{netip.MustParseAddr("192.168.0.2")}
		return c
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string // "" for valid
	}{
		{func(c *Config) {}, ""},
		{func(c *Config) { c.Mode, c.NodeName, c.NodeIPs = ModeNone, "", nil }, ""},
		{func(c *Config) { c.ClusterCIDRs = []string{"10.0.0.0/8", "10.1.0.0/16"} }, "more than one CIDR"},
		{func(c *Config) { c.ClusterCIDRs = []string{"10.0.0.0"} }, "--cluster-cidr"},
		{func(c *Config) { c.NodePortAddresses = []string{"eth0"} }, "--nodeport-addresses"},
		{func(c *Config) { c.MasqueradeBit = 32 }, "--masquerade-bit"},
		{func(c *Config) { c.SyncPeriod = time.Millisecond }, "shorter than"},
		{func(c *Config) { c.NodeIPs = nil }, "no node IPs"},
		{func(c *Config) { c.NodeName = "" }, "node name"},
		{func(c *Config) { c.Mode = "ipvs" }, "--proxy"},
		{func(c *Config) { c.HealthzBindAddress = "localhost:10256" }, "--healthz-bind-address"},
		{func(c *Config) { c.HealthzBindAddress = "0" }, ""},
	} {
		c := base()
		tc.edit(&c)
		_, err := c.parse(true)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: unexpected %v", c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one containing %q", c, err, tc.want)
		}
	}
}

// Validate checks the flags only: the speaker validates them before it knows the node.
func TestConfigValidateBeforeNodeIsKnown(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Errorf("defaults without node: %v", err)
	}
	c.MasqueradeBit = -1
	if err := c.Validate(); err == nil {
		t.Error("bad masquerade bit accepted")
	}
	if _, err := New(DefaultConfig()); err == nil || !strings.Contains(err.Error(), "node name") {
		t.Errorf("New without node: %v", err)
	}
}
