package ipam

import "testing"

// TestAssignment covers requested IPs (herald.dev/loadBalancerIPs, spec.loadBalancerIP)
// and IP sharing, like MetalLB's TestAssignment.
func TestAssignment(t *testing.T) {
	pools := func(t *testing.T) []Pool {
		return []Pool{
			mkPool(t, "default", []string{"10.0.0.0/24", "fc00::/120"}),
			mkPool(t, "manual", []string{"10.0.1.0/24"}, noAutoAssign),
			mkPool(t, "buggy", []string{"10.0.2.0/24"}, avoidBuggy),
			mkPool(t, "team-a", []string{"10.0.3.0/24"}, allocateTo(0, []string{"team-a"}, nil, nil)),
			mkPool(t, "leaving", []string{"10.0.4.0/24"}, terminating),
			mkPool(t, "v6only", []string{"fd00::/120"}),
		}
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{name: "requested IP in a pool", steps: []step{
			{alloc: alloc(mkSvc("default/s1", requested("10.0.0.5"))), want: []string{"10.0.0.5"}, wantPool: "default", wantChanged: yes()},
		}},
		{name: "requested IP outside every pool", steps: []step{
			{alloc: alloc(mkSvc("default/s1", requested("10.9.0.5"))), wantErr: ErrNoUsablePool,
				errText: "IP 10.9.0.5 is not available to this Service"},
		}},
		{name: "requested IP from an autoAssign=false pool", steps: []step{
			{alloc: alloc(mkSvc("default/s1", requested("10.0.1.7"))), want: []string{"10.0.1.7"}, wantPool: "manual"},
		}},
		{name: "requested IP from a pool whose serviceAllocation does not select the Service", steps: []step{
			{alloc: alloc(mkSvc("other/s1", requested("10.0.3.7"))), wantErr: ErrNoUsablePool,
				errText: "IP 10.0.3.7 is not available to this Service"},
			{alloc: alloc(mkSvc("team-a/s1", requested("10.0.3.7"))), want: []string{"10.0.3.7"}, wantPool: "team-a"},
		}},
		{name: "requested IP from a terminating pool", steps: []step{
			{alloc: alloc(mkSvc("default/s1", requested("10.0.4.7"))), wantErr: ErrNoUsablePool, errText: `pool "leaving" is being deleted`},
		}},
		{name: "requested buggy IP", steps: []step{
			{alloc: alloc(mkSvc("default/s1", requested("10.0.2.255"))), wantErr: ErrNoUsablePool,
				errText: `requested IP 10.0.2.255 ends in .0 or .255, which pool "buggy" avoids (avoidBuggyIPs)`},
			{alloc: alloc(mkSvc("default/s1", requested("10.0.2.0"))), wantErr: ErrNoUsablePool},
			{alloc: alloc(mkSvc("default/s1", requested("10.0.0.255"))), want: []string{"10.0.0.255"}, wantPool: "default"},
		}},
		{name: "requested IP and pool annotation", steps: []step{
			{alloc: alloc(mkSvc("default/s1", requested("10.0.0.5"), inPool("manual"))), wantErr: ErrNoUsablePool,
				errText: `requested IP 10.0.0.5 is in pool "default", not in the requested pool "manual"`},
			{alloc: alloc(mkSvc("default/s1", requested("10.0.1.5"), inPool("manual"))), want: []string{"10.0.1.5"}, wantPool: "manual"},
		}},
		{name: "requested IP in use without sharing", steps: []step{
			{alloc: alloc(mkSvc("default/svc1", requested("10.0.0.5"))), want: []string{"10.0.0.5"}, wantPool: "default"},
			{alloc: alloc(mkSvc("default/svc2", requested("10.0.0.5"))), wantErr: ErrIPInUse,
				errText: `IP 10.0.0.5 is in use by default/svc1 with sharing key "" (need the same non-empty herald.dev/allow-shared-ip key)`},
			{alloc: alloc(mkSvc("default/svc2", requested("10.0.0.5"), sharing("k"))), wantErr: ErrIPInUse},
		}},
		{name: "sharing with the same key and disjoint ports", steps: []step{
			{alloc: alloc(mkSvc("default/svc1", requested("10.0.0.5"), sharing("k"), ports("TCP/80"))), want: []string{"10.0.0.5"}, wantPool: "default"},
			{alloc: alloc(mkSvc("default/svc2", requested("10.0.0.5"), sharing("k"), ports("TCP/443", "UDP/80"))), want: []string{"10.0.0.5"}, wantPool: "default"},
			{alloc: alloc(mkSvc("default/svc3", requested("10.0.0.5"), sharing("k"), ports("TCP/53"))), want: []string{"10.0.0.5"}, wantPool: "default"},
		}},
		{name: "sharing with overlapping ports", steps: []step{
			{alloc: alloc(mkSvc("default/svc1", requested("10.0.0.5"), sharing("k"), ports("TCP/80"))), want: []string{"10.0.0.5"}, wantPool: "default"},
			{alloc: alloc(mkSvc("default/svc2", requested("10.0.0.5"), sharing("k"), ports("TCP/443", "TCP/80"))), wantErr: ErrIPInUse,
				errText: "port TCP/80 already used by default/svc1 on 10.0.0.5"},
		}},
		{name: "sharing with another key", steps: []step{
			{alloc: alloc(mkSvc("default/svc1", requested("10.0.0.5"), sharing("k"), ports("TCP/80"))), want: []string{"10.0.0.5"}, wantPool: "default"},
			{alloc: alloc(mkSvc("default/svc2", requested("10.0.0.5"), sharing("other"), ports("TCP/81"))), wantErr: ErrIPInUse,
				errText: `in use by default/svc1 with sharing key "k"`},
			{alloc: alloc(mkSvc("default/svc2", requested("10.0.0.5"), ports("TCP/81"))), wantErr: ErrIPInUse},
		}},
		{name: "sharing needs the same backend", steps: []step{
			{alloc: alloc(mkSvc("default/svc1", requested("10.0.0.5"), sharing("k"), ports("TCP/80"), backend("app=a"))), want: []string{"10.0.0.5"}, wantPool: "default"},
			{alloc: alloc(mkSvc("default/svc2", requested("10.0.0.5"), sharing("k"), ports("TCP/81"))), wantErr: ErrIPInUse,
				errText: `with externalTrafficPolicy Local and selector "app=a", this Service has externalTrafficPolicy Cluster`},
			{alloc: alloc(mkSvc("default/svc2", requested("10.0.0.5"), sharing("k"), ports("TCP/81"), backend("app=b"))), wantErr: ErrIPInUse},
			{alloc: alloc(mkSvc("default/svc2", requested("10.0.0.5"), sharing("k"), ports("TCP/81"), backend("app=a"))), want: []string{"10.0.0.5"}, wantPool: "default"},
		}},
		{name: "dual-stack requested IPs from one pool", steps: []step{
			{alloc: alloc(mkSvc("default/s1", families(RequireDualStack, IPv6, IPv4), requested("10.0.0.5", "fc00::5"))),
				want: []string{"fc00::5", "10.0.0.5"}, wantPool: "default"},
		}},
		{name: "dual-stack requested IPs from two pools", steps: []step{
			{alloc: alloc(mkSvc("default/s1", families(PreferDualStack, IPv4, IPv6), requested("10.0.0.5", "fd00::5"))), wantErr: ErrNoUsablePool,
				errText: `requested IPs 10.0.0.5, fd00::5 are in different pools ("default" and "v6only")`},
		}},
		{name: "PreferDualStack requesting one family gets just that", steps: []step{
			{alloc: alloc(mkSvc("default/s1", families(PreferDualStack, IPv4, IPv6), requested("fc00::9"))), want: []string{"fc00::9"}, wantPool: "default"},
			{alloc: alloc(mkSvc("default/s1", families(PreferDualStack, IPv4, IPv6), requested("fc00::9"))), want: []string{"fc00::9"}, wantPool: "default", wantChanged: no()},
		}},
		{name: "malformed requests", steps: []step{
			{alloc: alloc(mkSvc("default/s1", requested("10.0.0.5", "10.0.0.6"))), wantErr: ErrInvalidService, errText: "more than one IPv4 address requested"},
			{alloc: alloc(mkSvc("default/s1", requested("fc00::5"))), wantErr: ErrInvalidService, errText: "requested IP fc00::5 is IPv6 but the Service only wants IPv4"},
			{alloc: alloc(mkSvc("default/s1", families(RequireDualStack, IPv4, IPv6), requested("10.0.0.5"))), wantErr: ErrInvalidService, errText: "RequireDualStack"},
			{alloc: alloc(mkSvc("default/s1", families(RequireDualStack, IPv4))), wantErr: ErrInvalidService, errText: "RequireDualStack needs two ipFamilies"},
			{alloc: alloc(mkSvc("default/s1", families(SingleStack))), wantErr: ErrInvalidService},
			{alloc: alloc(mkSvc("", requested("10.0.0.5"))), wantErr: ErrInvalidService},
		}},
		{name: "IPv4-mapped request is read as IPv4", steps: []step{
			{alloc: alloc(mkSvc("default/s1", requested("::ffff:10.0.0.5"))), want: []string{"10.0.0.5"}, wantPool: "default"},
		}},
		{name: "requested IP held by the Service itself", steps: []step{
			{alloc: alloc(mkSvc("default/s1", requested("10.0.0.5"))), want: []string{"10.0.0.5"}, wantPool: "default"},
			{alloc: alloc(mkSvc("default/s1", requested("10.0.0.5"))), want: []string{"10.0.0.5"}, wantPool: "default", wantChanged: no()},
		}},
		{name: "requested IP taken from the recycled queue", steps: []step{
			{alloc: alloc(mkSvc("default/s1", requested("10.0.0.5"))), want: []string{"10.0.0.5"}, wantPool: "default"},
			{release: "default/s1", want: []string{"10.0.0.5"}},
			{alloc: alloc(mkSvc("default/s2", requested("10.0.0.5"))), want: []string{"10.0.0.5"}, wantPool: "default"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New()
			if probs := a.SetPools(pools(t)); len(probs) != 0 {
				t.Fatal(probs)
			}
			runSteps(t, a, c.steps)
		})
	}
}
