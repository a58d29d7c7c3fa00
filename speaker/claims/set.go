package claims

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/election"
)

// Set are the IPs one speaker announces, each with what the others need to keep it
// there: the rebalance token of its Services when the speaker took it, and the nodes
// it stands in for. Speakers publish their sets to each other (members.Publish): they
// are the incumbents of the election.
type Set map[netip.Addr]Claim

// Claim is one IP of a Set.
type Claim struct {
	// Token is the IP's rebalance token (Tokens) when the speaker took it.
	Token string `json:"t,omitempty"`
	// Over are the speakers the hash ranked before this one when it took the IP: they
	// do not take it back (election.Incumbent).
	Over []string `json:"o,omitempty"`
	// Gen orders the claims of one IP: a speaker that takes an IP claims it with one
	// more than the highest Gen among the claims it knows then (Gens), so the latest
	// informed taker has the highest. Without it, a node back from the dead with the
	// claim it made long ago as a stand-in would take the IP from the node that took it
	// back meanwhile.
	// Claims of speakers that do not write it count as 0.
	Gen uint64 `json:"g,omitempty"`
}

// Encode writes the claims as JSON, IPs sorted.
func (c Set) Encode() []byte {
	m := make(map[string]Claim, len(c))
	for ip, cl := range c {
		m[ip.String()] = cl
	}
	b, err := json.Marshal(m) // maps are written sorted by key
	if err != nil {
		panic(fmt.Sprintf("claims: %v", err)) // strings and slices of strings always marshal
	}
	return b
}

// Decode reads what Encode wrote.
func Decode(data []byte) (Set, error) {
	c := Set{}
	if len(bytes.TrimSpace(data)) == 0 {
		return c, nil
	}
	var m map[string]Claim
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	for addr, cl := range m {
		ip, err := netip.ParseAddr(addr)
		if err != nil {
			return nil, fmt.Errorf("claims: %q: %w", addr, err)
		}
		ip = ip.Unmap()
		if _, twice := c[ip]; twice {
			// "::ffff:a.b.c.d" and "a.b.c.d" are one IP: which claim wins would
			// depend on map order, so neither does.
			return nil, fmt.Errorf("claims: %s is claimed twice", ip)
		}
		if len(cl.Over) == 0 {
			cl.Over = nil // as Encode omits it
		}
		c[ip] = cl
	}
	return c, nil
}

// Tokens returns, per LoadBalancer IP, the rebalance token of the Services holding it:
// their annotations' values, sorted and comma-joined ("" without any).
func Tokens(services []*corev1.Service) map[netip.Addr]string {
	values := map[netip.Addr][]string{}
	for _, svc := range services {
		v := svc.Annotations[heraldv1.AnnotationRebalance]
		for _, in := range svc.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(in.IP)
			if err != nil {
				continue
			}
			ip = ip.Unmap()
			if _, ok := values[ip]; !ok {
				values[ip] = nil
			}
			if v != "" {
				values[ip] = append(values[ip], v)
			}
		}
	}
	out := make(map[netip.Addr]string, len(values))
	for ip, vs := range values {
		slices.Sort(vs)
		out[ip] = strings.Join(slices.Compact(vs), ",")
	}
	return out
}

// Incumbents returns, per IP, the node whose claim on it carries the IP's current
// token, with the nodes it stands in for. Where several nodes claim an IP (a move under
// way, a node that took an IP back before it heard the node standing in for it, a node
// back from a stall with the claims it had), the latest taker keeps it: the claimant
// with the highest Gen, or, among several with that Gen, the one standing in for all
// the others (it took the IP from them, later). Otherwise the IP has no incumbent and
// the hash places it. Over sets are ranks of one hash order, so at most one claimant
// stands in for all the others, and every speaker with the same claims picks the same
// one.
func Incumbents(claims map[string]Set, tokens map[netip.Addr]string) map[netip.Addr]election.Incumbent {
	latest := map[netip.Addr][]election.Incumbent{} // the claimants of the highest Gen
	gens := map[netip.Addr]uint64{}
	for node, c := range claims {
		for ip, cl := range c {
			want, ok := tokens[ip]
			if !ok || want != cl.Token {
				continue
			}
			g, seen := gens[ip]
			switch {
			case !seen || cl.Gen > g:
				gens[ip] = cl.Gen
				latest[ip] = []election.Incumbent{{Node: node, Over: cl.Over}}
			case cl.Gen == g:
				latest[ip] = append(latest[ip], election.Incumbent{Node: node, Over: cl.Over})
			}
		}
	}
	out := make(map[netip.Addr]election.Incumbent, len(latest))
	for ip, cs := range latest {
		for _, c := range cs {
			if standsInForAll(c, cs) {
				out[ip] = c
				break
			}
		}
	}
	return out
}

// standsInForAll says whether claimant c stands in for every other claimant of cs.
func standsInForAll(c election.Incumbent, cs []election.Incumbent) bool {
	for _, o := range cs {
		if o.Node != c.Node && !slices.Contains(c.Over, o.Node) {
			return false
		}
	}
	return true
}

// Gens returns, per IP, the highest Gen among the claims of every set. It is
// computed afresh from the claims known now rather than remembered: a counter kept
// across Services that reuse an IP, or bumped by a speaker cut off from the others,
// would let a stale or uninformed claim outrank the claim of the node that took the IP
// over.
func Gens(sets ...map[string]Set) map[netip.Addr]uint64 {
	out := map[netip.Addr]uint64{}
	for _, set := range sets {
		for _, c := range set {
			for ip, cl := range c {
				if cl.Gen > out[ip] {
					out[ip] = cl.Gen
				}
			}
		}
	}
	return out
}

// own are the claims of a speaker announcing owned, each as made when the speaker took
// it (taken). The token is not refreshed afterwards: a rebalance asked while the IP's
// hash owner could not take it stays asked until it can.
func own(owned []netip.Addr, taken map[netip.Addr]Claim) Set {
	c := make(Set, len(owned))
	for _, ip := range owned {
		c[ip] = taken[ip]
	}
	return c
}
