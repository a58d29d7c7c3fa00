//go:build linux

package oracle

import (
	"net/netip"
	"strings"
	"testing"
)

// TestOptionsReachTheProxier checks, for each option, a rule it must add and
// a rule it must remove compared with the defaults.
func TestOptionsReachTheProxier(t *testing.T) {
	const (
		masquerade  = `-j MASQUERADE --random-fully`
		invalidDrop = `-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP`
		localhostFW = `-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections"`
		allLocal    = `-m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`
		podMasq     = `--dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ`
		podShortcut = `"pod traffic for ns1/svc1:p80 external destinations" -s 10.0.0.0/8 -j`
	)
	for _, tc := range []struct {
		name     string
		change   func(*Options)
		want     []string
		dontWant []string
	}{{
		name: "defaults of kube-proxy on a modern host",
		want: []string{masquerade, invalidDrop, localhostFW, allLocal, podMasq, podShortcut,
			`-A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp -d 127.0.0.0/8 --dport 3001 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j`},
	}, {
		name:     "iptables without --random-fully",
		change:   func(o *Options) { o.NoRandomFully = true },
		want:     []string{`"kubernetes service traffic requiring SNAT" -j MASQUERADE` + "\n"},
		dontWant: []string{masquerade},
	}, {
		name:     "no nfacct",
		change:   func(o *Options) { o.NoNFAcct = true },
		want:     []string{`-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP`},
		dontWant: []string{"nfacct"},
	}, {
		name:     "nf_conntrack_tcp_be_liberal",
		change:   func(o *Options) { o.ConntrackTCPBeLiberal = true },
		dontWant: []string{"INVALID"},
	}, {
		name:     "localhost NodePorts off",
		change:   func(o *Options) { o.DisableLocalhostNodePorts = true },
		want:     []string{`-m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS`},
		dontWant: []string{"KUBE-FIREWALL", "-d 127.0.0.0/8 --dport 3001"},
	}, {
		name:   "masquerade bit 5",
		change: func(o *Options) { o.MasqueradeBit = 5 },
		want:   []string{`-A KUBE-MARK-MASQ -j MARK --or-mark 0x00000020`},
	}, {
		name:     "masquerade all",
		change:   func(o *Options) { o.MasqueradeAll = true },
		want:     []string{`-d 172.30.0.41 --dport 80 -j KUBE-MARK-MASQ`},
		dontWant: []string{podMasq},
	}, {
		name:     "nodeport addresses",
		change:   func(o *Options) { o.NodePortAddresses = []string{"192.168.0.0/24"} },
		want:     []string{`"kubernetes service nodeports; NOTE: this must be the last rule in this chain" -d 192.168.0.2 -j KUBE-NODEPORTS`},
		dontWant: []string{allLocal, "KUBE-FIREWALL"},
	}, {
		name:   "nodeport addresses primary",
		change: func(o *Options) { o.NodePortAddresses = []string{NodePortAddressesPrimary} },
		want:   []string{`-d 192.168.0.2 -j KUBE-NODEPORTS`},
	}, {
		name:     "no local-traffic detector",
		change:   func(o *Options) { o.ClusterCIDRs = []string{"fd00:10::/64"} },
		dontWant: []string{podMasq, podShortcut, "pod traffic"},
	}, {
		name:   "bridge interface detector",
		change: func(o *Options) { o.ClusterCIDRs, o.BridgeInterface = nil, "cbr0" },
		want:   []string{`--dport 80 ! -i cbr0 -j KUBE-MARK-MASQ`, `external destinations" -i cbr0 -j`},
	}, {
		name:   "interface name prefix detector",
		change: func(o *Options) { o.ClusterCIDRs, o.InterfaceNamePrefix = nil, "veth" },
		want:   []string{`external destinations" -i veth+ -j`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{NodeName: testNodeName, NodeIPs: []netip.Addr{testNodeIP}, ClusterCIDRs: []string{podCIDR}}
			if tc.change != nil {
				tc.change(&opts)
			}
			o := newOracle(t, opts)
			workedExample(o)
			payload := mustSync(t, o, true).Payload
			for _, want := range tc.want {
				if !strings.Contains(payload, want) {
					t.Errorf("payload lacks %q", want)
				}
			}
			for _, dontWant := range tc.dontWant {
				if strings.Contains(payload, dontWant) {
					t.Errorf("payload holds %q", dontWant)
				}
			}
			if t.Failed() {
				t.Logf("payload:\n%s", payload)
			}
		})
	}
}

func TestInvalidOptions(t *testing.T) {
	valid := Options{NodeName: testNodeName}
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"no node name", func(o *Options) { o.NodeName = "" }, "NodeName is required"},
		{"masquerade bit", func(o *Options) { o.MasqueradeBit = 32 }, "MasqueradeBit 32"},
		{"cluster CIDR", func(o *Options) { o.ClusterCIDRs = []string{"10.0.0.0/33"} }, "ClusterCIDRs"},
		{"two detectors", func(o *Options) { o.ClusterCIDRs, o.BridgeInterface = []string{podCIDR}, "cbr0" }, "at most one"},
		{"nodeport address", func(o *Options) { o.NodePortAddresses = []string{"192.168.0.2"} }, "NodePortAddresses"},
		{"node IP", func(o *Options) { o.NodeIPs = []netip.Addr{{}} }, "invalid address"},
		{"sync period", func(o *Options) { o.SyncPeriod = -1 }, "SyncPeriod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := valid
			tc.change(&opts)
			_, err := New(opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
