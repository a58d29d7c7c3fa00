package election

import (
	"bytes"
	"crypto/sha256"
	"math"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// Builders for the table tests. Selectors use labels.Parse syntax.

var (
	yes = new(true)
	no  = new(false)
)

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func sel(s string) labels.Selector {
	l, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}

func sels(ss ...string) []labels.Selector {
	var out []labels.Selector
	for _, s := range ss {
		out = append(out, sel(s))
	}
	return out
}

type nodeOpt func(*Node)

func mkNode(name string, opts ...nodeOpt) Node {
	n := Node{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func label(k, v string) nodeOpt { return func(n *Node) { n.Labels[k] = v } }
func excluded(n *Node)          { n.Labels[ExcludeLabel] = "" }
func unavailable(n *Node)       { n.NetworkUnavailable = true }

// view makes every node a live member.
func view(ads []Advertisement, nodes ...Node) View {
	v := View{Nodes: nodes, Advertisements: ads}
	for _, n := range nodes {
		v.Members = append(v.Members, n.Name)
	}
	return v
}

// allPools is the L2Advertisement with an empty spec.
func allPools(name string) Advertisement { return Advertisement{Name: name, AllPools: true} }

type adOpt func(*Advertisement)

func mkAd(name string, pools []string, opts ...adOpt) Advertisement {
	a := Advertisement{Name: name, Pools: pools}
	for _, o := range opts {
		o(&a)
	}
	return a
}

func onNodes(s ...string) adOpt              { return func(a *Advertisement) { a.NodeSelectors = sels(s...) } }
func forSvcs(s ...string) adOpt              { return func(a *Advertisement) { a.ServiceSelectors = sels(s...) } }
func ifaces(s ...string) adOpt               { return func(a *Advertisement) { a.Interfaces = s } }
func ads(a ...Advertisement) []Advertisement { return a }

// Endpoints by condition.
func readyOn(node string) Endpoint       { return Endpoint{Node: node, Ready: yes, Serving: yes} }
func unknownOn(node string) Endpoint     { return Endpoint{Node: node} } // conditions unset: ready
func terminatingOn(node string) Endpoint { return Endpoint{Node: node, Ready: no, Serving: yes} }
func notReadyOn(node string) Endpoint    { return Endpoint{Node: node, Ready: no, Serving: no} }

type svcOpt func(*Service)

// mkSvc is a Cluster Service of pool "default" with one ready endpoint on no node in
// particular, holding ips.
func mkSvc(key string, ips []string, opts ...svcOpt) Service {
	s := Service{Key: key, Pool: "default", Labels: map[string]string{}, Endpoints: []Endpoint{readyOn("")}}
	for _, a := range ips {
		s.IPs = append(s.IPs, ip(a))
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func local(s *Service)                 { s.Local = true }
func inPool(p string) svcOpt           { return func(s *Service) { s.Pool = p } }
func svcLabel(k, v string) svcOpt      { return func(s *Service) { s.Labels[k] = v } }
func endpoints(eps ...Endpoint) svcOpt { return func(s *Service) { s.Endpoints = eps } }
func ips(s ...string) []string         { return s }

// hashOrder sorts nodes by sha256(node#ip), written out independently of NodeHash.
func hashOrder(key string, nodes ...string) []string {
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(a, b string) int {
		ha, hb := sha256.Sum256([]byte(a+"#"+key)), sha256.Sum256([]byte(b+"#"+key))
		return bytes.Compare(ha[:], hb[:])
	})
	return out
}

// ranked is the expected candidate list: tiers best first, each tier in hash order.
func ranked(key string, tiers ...[]string) []string {
	var out []string
	for _, t := range tiers {
		out = append(out, hashOrder(key, t...)...)
	}
	return out
}

func tier(nodes ...string) []string { return nodes }

// electAll is Elect listing every candidate, to compare with the reference.
func electAll(v View, services []Service) []Decision {
	return electListing(v, services, math.MaxInt)
}

// decisionFor returns the Decision for a, failing the test when there is none.
func decisionFor(t *testing.T, ds []Decision, a string) Decision {
	t.Helper()
	for _, d := range ds {
		if d.IP == ip(a) {
			return d
		}
	}
	t.Fatalf("no decision for %s in %v", a, ds)
	return Decision{}
}
