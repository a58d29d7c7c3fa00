package election

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// The properties of the issue, on random views:
//   - speakers given the same view, in any order, elect the same single owner per IP
//     (TestSpeakersAgree), the one a naive reading of the rule gives (TestMatchesReference);
//   - removing a node that does not own an IP never moves the IP (TestRemoveNonOwner);
//   - adding a node moves only the IPs it wins (TestAddNode).

var propertySeeds = 2000

func forSeeds(t *testing.T, f func(t *testing.T, rnd *rand.Rand)) {
	seeds := propertySeeds
	if testing.Short() {
		seeds /= 10
	}
	for seed := range seeds {
		rnd := rand.New(rand.NewPCG(uint64(seed), 7))
		t.Run(fmt.Sprint(seed), func(t *testing.T) { f(t, rnd) })
	}
}

func TestSpeakersAgree(t *testing.T) {
	forSeeds(t, func(t *testing.T, rnd *rand.Rand) {
		v, svcs := randomView(rnd), randomServices(rnd)
		want := Elect(v, svcs)
		checkInvariants(t, v, svcs, want)
		// Every live speaker runs the election on its own copy, inputs in another order,
		// and announces what it owns.
		owners := map[netip.Addr][]string{}
		for _, me := range v.Members {
			sv, ss := shuffled(rnd, v, svcs)
			got := Elect(sv, ss)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("speaker %s disagrees:\n got %+v\nwant %+v", me, got, want)
			}
			for _, d := range got {
				if d.Owner == me {
					owners[d.IP] = append(owners[d.IP], me)
				}
			}
		}
		for _, d := range want {
			if n := len(owners[d.IP]); (d.Owner == "" && n != 0) || (d.Owner != "" && n != 1) {
				t.Errorf("%s announced by %v, owner %q", d.IP, owners[d.IP], d.Owner)
			}
		}
	})
}

func TestMatchesReference(t *testing.T) {
	forSeeds(t, func(t *testing.T, rnd *rand.Rand) {
		v, svcs := randomView(rnd), randomServices(rnd)
		got := electAll(v, svcs)
		ref := reference(v, svcs)
		if len(got) != len(ref) {
			t.Fatalf("%d decisions, reference has %d", len(got), len(ref))
		}
		for _, d := range got {
			if want := ref[d.IP]; !slices.Equal(d.Candidates, want) {
				t.Errorf("%s: candidates %v, reference %v", d.IP, d.Candidates, want)
			}
		}
		// Elect lists the first MaxCandidates and decides the same.
		for i, d := range Elect(v, svcs) {
			all := got[i]
			all.Candidates = all.Candidates[:min(MaxCandidates, len(all.Candidates))]
			if !reflect.DeepEqual(d, all) {
				t.Errorf("Elect %+v, listing all %+v", d, all)
			}
		}
	})
}

func TestRemoveNonOwner(t *testing.T) {
	forSeeds(t, func(t *testing.T, rnd *rand.Rand) {
		v, svcs := randomView(rnd), randomServices(rnd)
		if len(v.Members) == 0 {
			return
		}
		gone := v.Members[rnd.IntN(len(v.Members))]
		before := electAll(v, svcs)
		v.Members = slices.DeleteFunc(slices.Clone(v.Members), func(m string) bool { return m == gone })
		after := electAll(v, svcs)
		for i, d := range after {
			old := before[i]
			if old.Owner != gone && d.Owner != old.Owner {
				t.Errorf("%s moved from %q to %q when %s left", d.IP, old.Owner, d.Owner, gone)
			}
			// Stronger: the others keep their order.
			if want := slices.DeleteFunc(slices.Clone(old.Candidates), func(n string) bool { return n == gone }); !slices.Equal(d.Candidates, want) {
				t.Errorf("%s: candidates %v after %s left, want %v", d.IP, d.Candidates, gone, want)
			}
		}
	})
}

func TestAddNode(t *testing.T) {
	forSeeds(t, func(t *testing.T, rnd *rand.Rand) {
		v, svcs := randomView(rnd), randomServices(rnd)
		before := electAll(v, svcs)
		// "new" may already have endpoints: its pods were scheduled before its speaker joined.
		v.Nodes = append(slices.Clone(v.Nodes), randomNode(rnd, "new"))
		v.Members = append(slices.Clone(v.Members), "new")
		after := electAll(v, svcs)
		for i, d := range after {
			old := before[i]
			if d.Owner != old.Owner && d.Owner != "new" {
				t.Errorf("%s moved from %q to %q when node new joined", d.IP, old.Owner, d.Owner)
			}
			if others := slices.DeleteFunc(slices.Clone(d.Candidates), func(n string) bool { return n == "new" }); !slices.Equal(others, old.Candidates) {
				t.Errorf("%s: candidates %v after new joined, were %v", d.IP, d.Candidates, old.Candidates)
			}
		}
	})
}

// checkInvariants holds for every result: one Decision per IP, owners are eligible live
// members, candidates distinct, IPs of one Service on one node.
func checkInvariants(t *testing.T, v View, svcs []Service, ds []Decision) {
	t.Helper()
	eligible := map[string]bool{}
	for _, n := range v.Nodes {
		if !n.NetworkUnavailable && (!isExcluded(n) || v.IgnoreExcludeLabel) && slices.Contains(v.Members, n.Name) {
			eligible[n.Name] = true
		}
	}
	owner := map[netip.Addr]string{}
	for i, d := range ds {
		if i > 0 && !ds[i-1].IP.Less(d.IP) {
			t.Fatalf("decisions not sorted or repeated at %s", d.IP)
		}
		owner[d.IP] = d.Owner
		if (d.Owner == "") != (d.Reason != "") || (d.Owner == "") != (len(d.Candidates) == 0) {
			t.Errorf("%s: owner %q reason %q candidates %v", d.IP, d.Owner, d.Reason, d.Candidates)
		}
		if d.Owner != "" && d.Candidates[0] != d.Owner {
			t.Errorf("%s: owner %s is not the first candidate %v", d.IP, d.Owner, d.Candidates)
		}
		for j, c := range d.Candidates {
			if !eligible[c] || slices.Contains(d.Candidates[:j], c) {
				t.Errorf("%s: candidate %s ineligible or repeated in %v", d.IP, c, d.Candidates)
			}
		}
	}
	for _, s := range svcs {
		for _, a := range s.IPs {
			if o, ok := owner[a.Unmap()]; !ok || o != owner[s.IPs[0].Unmap()] {
				t.Errorf("Service %s: %s owned by %q, %s by %q", s.Key, a, o, s.IPs[0], owner[s.IPs[0].Unmap()])
			}
		}
	}
}

// reference is the rule of the package doc read naively, without bitsets or scratch
// space: the candidate list of every IP.
func reference(v View, svcs []Service) map[netip.Addr][]string {
	// Groups: merge IP sets until no Service spans two of them.
	var groups []map[netip.Addr]bool
	for _, s := range svcs {
		g := map[netip.Addr]bool{}
		for _, a := range s.IPs {
			g[a.Unmap()] = true
		}
		for i := 0; i < len(groups); {
			if overlaps(groups[i], g) {
				for a := range groups[i] {
					g[a] = true
				}
				groups = slices.Delete(groups, i, i+1)
				continue
			}
			i++
		}
		if len(g) > 0 {
			groups = append(groups, g)
		}
	}
	out := map[netip.Addr][]string{}
	for _, g := range groups {
		var key netip.Addr
		for a := range g {
			if !key.IsValid() || a.Less(key) {
				key = a
			}
		}
		type scored struct {
			name         string
			cover, ready int
			leaving      bool
		}
		var cands []scored
		for _, n := range v.Nodes {
			if !slices.Contains(v.Members, n.Name) || n.NetworkUnavailable || (isExcluded(n) && !v.IgnoreExcludeLabel) {
				continue
			}
			sc := scored{name: n.Name, leaving: n.Leaving != ""}
			for _, s := range svcs {
				if !overlaps(g, ipSet(s.IPs)) || s.Pool == "" {
					continue
				}
				covered, allowed := false, false
				for _, ad := range v.Advertisements {
					if (ad.AllPools || slices.Contains(ad.Pools, s.Pool)) && matches(ad.ServiceSelectors, s.Labels) {
						covered = true
						allowed = allowed || matches(ad.NodeSelectors, n.Labels)
					}
				}
				anywhere, best := false, 0
				for _, ep := range s.Endpoints {
					f := 0
					switch {
					case ep.Ready == nil || *ep.Ready:
						f = 2
					case ep.Serving != nil && *ep.Serving:
						f = 1
					}
					anywhere = anywhere || f > 0
					if ep.Node == n.Name {
						best = max(best, f)
					}
				}
				if !covered || !anywhere || !allowed {
					continue
				}
				if !s.Local {
					best = 2
				}
				if best > 0 {
					sc.cover++
				}
				if best == 2 {
					sc.ready++
				}
			}
			if sc.cover > 0 {
				cands = append(cands, sc)
			}
		}
		// The incumbent: the one eligible node the group's IPs name, if they agree,
		// with the nodes it stands in for.
		inc, conflict := "", false
		over := map[string]bool{}
		for a := range g {
			in, ok := v.Incumbents[a]
			if !ok {
				continue
			}
			n := in.Node
			if (inc != "" && inc != n) || !slices.ContainsFunc(v.Nodes, func(x Node) bool { return x.Name == n }) {
				conflict = true
			}
			inc = n
			for _, o := range in.Over {
				over[o] = true
			}
		}
		eligible := false
		for _, n := range v.Nodes {
			if n.Name == inc && slices.Contains(v.Members, n.Name) && !n.NetworkUnavailable && (!isExcluded(n) || v.IgnoreExcludeLabel) {
				eligible = true
			}
		}
		if conflict || !eligible {
			inc = ""
		}
		slices.SortFunc(cands, func(a, b scored) int {
			if a.leaving != b.leaving { // a leaving node ranks after every other
				if a.leaving {
					return 1
				}
				return -1
			}
			if a.cover != b.cover {
				return b.cover - a.cover
			}
			if a.ready != b.ready {
				return b.ready - a.ready
			}
			ha, hb := sha256.Sum256([]byte(a.name+"#"+key.String())), sha256.Sum256([]byte(b.name+"#"+key.String()))
			return bytes.Compare(ha[:], hb[:])
		})
		// The owner is the first of the best that the incumbent does not stand in for,
		// or the incumbent if it comes first.
		if inc != "" {
			for k, c := range cands {
				if c.leaving != cands[0].leaving || c.cover != cands[0].cover || c.ready != cands[0].ready || (c.name != inc && !over[c.name]) {
					break
				}
				if c.name == inc {
					cands = append([]scored{c}, slices.Delete(slices.Clone(cands), k, k+1)...)
					break
				}
			}
		}
		var names []string
		for _, c := range cands {
			names = append(names, c.name)
		}
		for a := range g {
			out[a] = names
		}
	}
	return out
}

func matches(sels []labels.Selector, l map[string]string) bool {
	if len(sels) == 0 {
		return true
	}
	for _, s := range sels {
		if s != nil && s.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

func ipSet(ips []netip.Addr) map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	for _, a := range ips {
		m[a.Unmap()] = true
	}
	return m
}

func overlaps(a, b map[netip.Addr]bool) bool {
	for x := range b {
		if a[x] {
			return true
		}
	}
	return false
}
