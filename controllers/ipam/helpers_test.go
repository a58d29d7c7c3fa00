package ipam

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Builders for the table tests.

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type poolOpt func(*Pool)

// mkPool builds an autoAssign pool created at epoch; addrs use spec.addresses syntax.
func mkPool(t testing.TB, name string, addrs []string, opts ...poolOpt) Pool {
	t.Helper()
	rs, err := ParseAddresses(addrs)
	if err != nil {
		t.Fatalf("pool %s: %v", name, err)
	}
	p := Pool{Name: name, Ranges: rs, AutoAssign: true, Created: epoch}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func noAutoAssign(p *Pool)   { p.AutoAssign = false }
func avoidBuggy(p *Pool)     { p.AvoidBuggyIPs = true }
func terminating(p *Pool)    { p.Terminating = true }
func crossNamespace(p *Pool) { p.CrossNamespaceSharing = true }
func createdAt(minute int) poolOpt {
	return func(p *Pool) { p.Created = epoch.Add(time.Duration(minute) * time.Minute) }
}

// allocateTo sets spec.serviceAllocation; selectors use labels.Parse syntax.
func allocateTo(priority int, namespaces []string, nsSelectors, svcSelectors []string) poolOpt {
	return func(p *Pool) {
		al := &Allocation{Priority: priority, Namespaces: namespaces}
		for _, s := range nsSelectors {
			al.NamespaceSelectors = append(al.NamespaceSelectors, mustSelector(s))
		}
		for _, s := range svcSelectors {
			al.ServiceSelectors = append(al.ServiceSelectors, mustSelector(s))
		}
		p.Allocation = al
	}
}

func mustSelector(s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

type svcOpt func(*Service)

// mkSvc builds a SingleStack IPv4 Service "namespace/name" without ports.
func mkSvc(key string, opts ...svcOpt) Service {
	ns, _, _ := strings.Cut(key, "/")
	s := Service{Key: key, Namespace: ns, Families: []Family{IPv4}, Policy: SingleStack, Created: epoch}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func families(policy DualStackPolicy, fs ...Family) svcOpt {
	return func(s *Service) { s.Policy, s.Families = policy, fs }
}
func requested(ips ...string) svcOpt {
	return func(s *Service) {
		s.RequestedIPs = nil
		for _, ip := range ips {
			s.RequestedIPs = append(s.RequestedIPs, netip.MustParseAddr(ip))
		}
	}
}
func inPool(name string) svcOpt       { return func(s *Service) { s.Pool = name } }
func sharing(key string) svcOpt       { return func(s *Service) { s.SharingKey = key } }
func backend(key string) svcOpt       { return func(s *Service) { s.BackendKey = key } }
func svcLabels(l string) svcOpt       { return func(s *Service) { s.Labels = labelMap(l) } }
func namespaceLabels(l string) svcOpt { return func(s *Service) { s.NamespaceLabels = labelMap(l) } }

// ports parses "TCP/80" pairs.
func ports(ps ...string) svcOpt {
	return func(s *Service) {
		s.Ports = nil
		for _, p := range ps {
			proto, num, _ := strings.Cut(p, "/")
			n, err := strconv.Atoi(num)
			if err != nil {
				panic(err)
			}
			s.Ports = append(s.Ports, Port{Protocol: proto, Port: int32(n)})
		}
	}
}

func labelMap(l string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(l, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func addrStrings(ips []netip.Addr) []string {
	out := []string{}
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

// step is one call in a table test. Exactly one of the op fields is set.
type step struct {
	setPools []Pool // SetPools
	setNone  bool   // SetPools(nil)
	alloc    *Service
	release  string
	restore  *Service
	ips      []string // restore input
	pool     string   // restore input

	setConflicts bool     // SetConflicts(conflicts); want holds the added addresses
	conflicts    []string // SetConflicts input
	cleared      []string // SetConflicts: the addresses no longer in conflict

	stats     string    // after the step, Stats of this pool must be wantStats
	wantStats PoolStats // with stats

	want        []string // IPs of the Result (alloc), or released (release)
	wantPool    string
	wantChanged *bool
	wantErr     error    // errors.Is target; nil = no error expected unless errText set
	errText     string   // substring of the error text
	problems    []string // SetPools: "pool:Reason:substring"
}

func alloc(s Service) *Service { return &s }

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

func runSteps(t *testing.T, a *Allocator, steps []step) {
	t.Helper()
	for i, st := range steps {
		var err error
		switch {
		case st.setPools != nil || st.setNone:
			probs := a.SetPools(st.setPools)
			var got []string
			for _, p := range probs {
				got = append(got, p.Pool+":"+p.Reason+":"+p.Message)
			}
			if len(got) != len(st.problems) {
				t.Fatalf("step %d SetPools: problems %q, want %q", i, got, st.problems)
			}
			for j, w := range st.problems {
				pool, rest, _ := strings.Cut(w, ":")
				reason, text, _ := strings.Cut(rest, ":")
				if probs[j].Pool != pool || probs[j].Reason != reason || !strings.Contains(probs[j].Message, text) {
					t.Fatalf("step %d SetPools: problem %q, want %q", i, got[j], w)
				}
			}
		case st.alloc != nil:
			var res Result
			res, err = a.Allocate(*st.alloc)
			if got := addrStrings(res.IPs); !slices.Equal(got, nonNil(st.want)) {
				t.Fatalf("step %d Allocate(%s): IPs %v (err %v), want %v", i, st.alloc.Key, got, err, st.want)
			}
			if res.Pool != st.wantPool {
				t.Fatalf("step %d Allocate(%s): pool %q, want %q", i, st.alloc.Key, res.Pool, st.wantPool)
			}
			if st.wantChanged != nil && res.Changed != *st.wantChanged {
				t.Fatalf("step %d Allocate(%s): Changed %v, want %v", i, st.alloc.Key, res.Changed, *st.wantChanged)
			}
		case st.release != "":
			got := addrStrings(a.Release(st.release))
			if !slices.Equal(got, nonNil(st.want)) {
				t.Fatalf("step %d Release(%s): %v, want %v", i, st.release, got, st.want)
			}
		case st.restore != nil:
			err = a.Restore(*st.restore, addrs(st.ips...), st.pool)
		case st.setConflicts:
			added, cleared := a.SetConflicts(addrs(st.conflicts...))
			if got := addrStrings(added); !slices.Equal(got, nonNil(st.want)) {
				t.Fatalf("step %d SetConflicts(%v): added %v, want %v", i, st.conflicts, got, st.want)
			}
			if got := addrStrings(cleared); !slices.Equal(got, nonNil(st.cleared)) {
				t.Fatalf("step %d SetConflicts(%v): cleared %v, want %v", i, st.conflicts, got, st.cleared)
			}
		case st.stats != "":
		default:
			t.Fatalf("step %d: no op", i)
		}
		switch {
		case st.wantErr == nil && st.errText == "" && err != nil:
			t.Fatalf("step %d: unexpected error: %v", i, err)
		case (st.wantErr != nil || st.errText != "") && err == nil:
			t.Fatalf("step %d: no error, want %v %q", i, st.wantErr, st.errText)
		case st.wantErr != nil && !errors.Is(err, st.wantErr):
			t.Fatalf("step %d: error %q is not %v", i, err, st.wantErr)
		case st.errText != "" && !strings.Contains(err.Error(), st.errText):
			t.Fatalf("step %d: error %q does not contain %q", i, err, st.errText)
		}
		if st.stats != "" {
			if got := a.Stats(st.stats); got != st.wantStats {
				t.Fatalf("step %d: Stats(%s) = %+v, want %+v", i, st.stats, got, st.wantStats)
			}
		}
		checkInvariants(t, a)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
