package election

import (
	"bytes"
	"crypto/sha256"
	"net/netip"
	"slices"
)

// NodeHash is sha256(node + "#" + ip.String()), the tie-break of the election: for a
// given IP, the node with the smallest hash (compared as bytes) is preferred. It is
// rendezvous hashing, so each IP prefers its own node and a node joining or leaving
// disturbs only the IPs it ranks first for.
func NodeHash(node string, ip netip.Addr) [sha256.Size]byte {
	return hashWithSuffix(node, hashSuffix(ip))
}

// hashSuffix is the "#ip" part of the hashed string, computed once per IP.
func hashSuffix(ip netip.Addr) string { return "#" + ip.String() }

func hashWithSuffix(node, suffix string) [sha256.Size]byte {
	var buf [128]byte // node names are short; longer ones spill to the heap
	b := append(buf[:0], node...)
	b = append(b, suffix...)
	return sha256.Sum256(b)
}

// Order returns a sorted copy of nodes, most preferred for key first: the order the
// election uses among candidates that fit the IP's Services equally well.
func Order(key netip.Addr, nodes []string) []string {
	type ranked struct {
		hash [sha256.Size]byte
		node string
	}
	rs := make([]ranked, len(nodes))
	for i, n := range nodes {
		rs[i] = ranked{NodeHash(n, key), n}
	}
	slices.SortFunc(rs, func(a, b ranked) int { return compareHash(&a.hash, &b.hash, a.node, b.node) })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.node
	}
	return out
}

// compareHash orders by hash, then by name so the order is total even for equal names
// or (never seen) colliding hashes.
func compareHash(ha, hb *[sha256.Size]byte, a, b string) int {
	if c := bytes.Compare(ha[:], hb[:]); c != 0 {
		return c
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
