package election

import (
	"net/netip"
	"slices"
	"strings"
)

// group is a set of IPs that must have one owner — every IP held by a Service is tied to
// its other IPs, and an IP is tied to itself across the Services sharing it — with the
// Services holding them.
type group struct {
	ips      []netip.Addr // sorted; ips[0] is the hash key
	services []*Service   // sorted by Key
	holders  [][]int      // holders[k]: positions in services of the Services holding ips[k]
}

func (g *group) key() netip.Addr { return g.ips[0] }

// groupIPs splits the IPs of services into groups (connected components: union-find over
// IPs, joined by each Service). Services without a valid IP are dropped.
func groupIPs(services []Service) []group {
	index := map[netip.Addr]int{}
	var ips []netip.Addr
	var parent []int
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	owned := make([][]netip.Addr, len(services))
	for s := range services {
		owned[s] = normalize(services[s].IPs)
		first := -1
		for _, ip := range owned[s] {
			i, ok := index[ip]
			if !ok {
				i = len(ips)
				index[ip] = i
				ips = append(ips, ip)
				parent = append(parent, i)
			}
			if first < 0 {
				first = i
			} else if a, b := find(first), find(i); a != b {
				parent[b] = a
			}
		}
	}

	byRoot := map[int]int{}
	var groups []group
	gOf := func(ipIndex int) *group {
		r := find(ipIndex)
		gi, ok := byRoot[r]
		if !ok {
			gi = len(groups)
			byRoot[r] = gi
			groups = append(groups, group{})
		}
		return &groups[gi]
	}
	for i, ip := range ips {
		g := gOf(i)
		g.ips = append(g.ips, ip)
	}
	members := make([][]int, len(groups)) // service indices per group
	for s := range services {
		if len(owned[s]) > 0 {
			r := byRoot[find(index[owned[s][0]])]
			members[r] = append(members[r], s)
		}
	}

	for gi := range groups {
		g := &groups[gi]
		slices.SortFunc(g.ips, netip.Addr.Compare)
		// Equal keys (a caller bug) stay in input order; no output depends on it.
		slices.SortStableFunc(members[gi], func(a, b int) int { return strings.Compare(services[a].Key, services[b].Key) })
		g.services = make([]*Service, len(members[gi]))
		g.holders = make([][]int, len(g.ips))
		for p, s := range members[gi] {
			g.services[p] = &services[s]
			for _, ip := range owned[s] {
				k, _ := slices.BinarySearchFunc(g.ips, ip, netip.Addr.Compare)
				g.holders[k] = append(g.holders[k], p)
			}
		}
	}
	return groups
}

// normalize unmaps IPv4-mapped addresses (so 1.2.3.4 and ::ffff:1.2.3.4 are one IP and
// hash as "1.2.3.4", like net.IP.String), drops invalid ones and duplicates.
func normalize(in []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(in))
	for _, ip := range in {
		ip = ip.Unmap()
		if ip.IsValid() && !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out
}
