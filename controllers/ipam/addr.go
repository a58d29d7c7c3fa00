package ipam

import (
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
	"slices"

	"go4.org/netipx"
)

// familyIndex maps a family to the index of per-family arrays ([2]...).
func familyIndex(f Family) int {
	if f == IPv6 {
		return 1
	}
	return 0
}

// isBuggy reports an IPv4 address ending in .0 or .255, which some old CPE firmwares
// mistake for a network or broadcast address (avoidBuggyIPs).
func isBuggy(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	b := a.As4()
	return b[3] == 0 || b[3] == 255
}

// normalizeAddr makes addresses from user input comparable with pool addresses: pools
// never hold zones or IPv4-mapped IPv6 addresses.
func normalizeAddr(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// rangeString prints a range the way a user would write it: one IP, a CIDR or from-to.
func rangeString(r netipx.IPRange) string {
	if r.From() == r.To() {
		return r.From().String()
	}
	if p, ok := r.Prefix(); ok {
		return p.String()
	}
	return r.String()
}

func sameAddrSet(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// orderByFamily sorts ips so that they follow families (primary first); families not
// listed go last.
func orderByFamily(ips []netip.Addr, families []Family) []netip.Addr {
	rank := func(a netip.Addr) int {
		if i := slices.Index(families, FamilyOf(a)); i >= 0 {
			return i
		}
		return len(families)
	}
	slices.SortStableFunc(ips, func(x, y netip.Addr) int { return rank(x) - rank(y) })
	return ips
}

// u128 counts addresses: an IPv6 range can hold up to 2^128 of them.
type u128 struct{ hi, lo uint64 }

func u128Of(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// addSat adds saturating at 2^128-1 (only reachable by overlapping, disabled pools).
func (x u128) addSat(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, c := bits.Add64(x.hi, y.hi, c)
	if c != 0 {
		return u128{math.MaxUint64, math.MaxUint64}
	}
	return u128{hi, lo}
}

// subSat subtracts saturating at 0.
func (x u128) subSat(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, b := bits.Sub64(x.hi, y.hi, b)
	if b != 0 {
		return u128{}
	}
	return u128{hi, lo}
}

// int64Sat converts saturating at math.MaxInt64 (huge IPv6 pools).
func (x u128) int64Sat() int64 {
	if x.hi != 0 || x.lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(x.lo)
}

func u128From(n uint64) u128 { return u128{lo: n} }

// rangeSize is the number of addresses in r.
func rangeSize(r netipx.IPRange) u128 {
	return u128Of(r.To()).subSat(u128Of(r.From())).addSat(u128From(1))
}

// buggyCount is the number of IPv4 addresses ending in .0 or .255 in r.
func buggyCount(r netipx.IPRange) uint64 {
	if !r.From().Is4() {
		return 0
	}
	f, t := int64(u128Of(r.From()).lo&math.MaxUint32), int64(u128Of(r.To()).lo&math.MaxUint32)
	// endingIn counts x in [f, t] with x%256 == last, via floor division.
	endingIn := func(last int64) int64 { return floorDiv256(t-last) - floorDiv256(f-1-last) }
	return uint64(endingIn(0) + endingIn(255))
}

func floorDiv256(x int64) int64 {
	if x >= 0 {
		return x / 256
	}
	return -((-x + 255) / 256)
}
