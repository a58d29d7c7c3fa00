package ipam

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

var benchSizes = []int{1_000, 10_000, 100_000}

// fillPool returns an allocator with one big pool and n Services holding an IP in it:
// "packed" allocates them (the lowest n addresses), "scattered" restores them at
// random addresses, the shape after a restart, which splits the free tree into n ranges.
func fillPool(b *testing.B, n int, scattered bool, pool string) *Allocator {
	b.Helper()
	a := New()
	if probs := a.SetPools([]Pool{mkPool(b, "big", []string{pool})}); len(probs) > 0 {
		b.Fatal(probs)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	base := netip.MustParsePrefix(pool).Addr().As16()
	fam := []Family{IPv4}
	if netip.MustParsePrefix(pool).Addr().Is6() {
		fam = []Family{IPv6}
	}
	for i := range n {
		svc := mkSvc(fmt.Sprintf("ns/s%d", i), families(SingleStack, fam...))
		if !scattered {
			if _, err := a.Allocate(svc); err != nil {
				b.Fatal(err)
			}
			continue
		}
		ip := randomAddrIn(rnd, base, fam[0])
		for a.ips[ip] != nil {
			ip = randomAddrIn(rnd, base, fam[0])
		}
		if err := a.Restore(svc, []netip.Addr{ip}, "big"); err != nil {
			b.Fatal(err)
		}
	}
	return a
}

// randomAddrIn picks an address in 10.0.0.0/8 or fc00::/104 (the low 24 bits vary).
func randomAddrIn(rnd *rand.Rand, base [16]byte, f Family) netip.Addr {
	x := rnd.Uint32()
	base[13], base[14], base[15] = byte(x>>16), byte(x>>8), byte(x)
	if f == IPv4 {
		return netip.AddrFrom16(base).Unmap()
	}
	return netip.AddrFrom16(base)
}

// BenchmarkAllocateWithInUse measures one Allocate+Release of a new Service in a pool
// where n addresses are already in use; the cost must not grow with n.
func BenchmarkAllocateWithInUse(b *testing.B) {
	for _, pool := range []string{"10.0.0.0/8", "fc00::/104"} {
		for _, shape := range []string{"packed", "scattered"} {
			for _, n := range benchSizes {
				b.Run(fmt.Sprintf("%s/%s/%d", pool, shape, n), func(b *testing.B) {
					a := fillPool(b, n, shape == "scattered", pool)
					svc := mkSvc("bench/new", families(SingleStack, FamilyOf(netip.MustParsePrefix(pool).Addr())))
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						if _, err := a.Allocate(svc); err != nil {
							b.Fatal(err)
						}
						a.Release(svc.Key)
					}
				})
			}
		}
	}
}

// BenchmarkAllocateSharing measures a sharing Service packed onto an IP among n IPs in
// use, half of them held with its sharing key.
func BenchmarkAllocateSharing(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			a := New()
			a.SetPools([]Pool{mkPool(b, "big", []string{"10.0.0.0/8"})})
			for i := range n {
				svc := mkSvc(fmt.Sprintf("ns/s%d", i), ports("TCP/80"))
				if i%2 == 0 {
					svc.SharingKey = "k"
				}
				if _, err := a.Allocate(svc); err != nil {
					b.Fatal(err)
				}
			}
			svc := mkSvc("bench/new", sharing("k"), ports("TCP/443"))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := a.Allocate(svc); err != nil {
					b.Fatal(err)
				}
				a.Release(svc.Key)
			}
		})
	}
}

// BenchmarkRestore100k measures rebuilding the state of 100k Services at start.
func BenchmarkRestore100k(b *testing.B) {
	const n = 100_000
	rnd := rand.New(rand.NewPCG(3, 4))
	base := netip.MustParseAddr("10.0.0.0").As16()
	seen := map[netip.Addr]bool{}
	svcs := make([]Service, n)
	ips := make([][]netip.Addr, n)
	for i := range n {
		ip := randomAddrIn(rnd, base, IPv4)
		for seen[ip] {
			ip = randomAddrIn(rnd, base, IPv4)
		}
		seen[ip] = true
		svcs[i] = mkSvc(fmt.Sprintf("ns/s%d", i), ports("TCP/80"))
		ips[i] = []netip.Addr{ip}
	}
	pools := []Pool{mkPool(b, "big", []string{"10.0.0.0/8"})}
	b.ReportAllocs()
	for b.Loop() {
		a := New()
		a.SetPools(pools)
		for i := range n {
			if err := a.Restore(svcs[i], ips[i], "big"); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkSetPools measures SetPools with 100k IPs in use: a flags-only change (the
// fast path taken on pool status updates) and a change of ranges (a rebuild).
func BenchmarkSetPools(b *testing.B) {
	a := fillPool(b, 100_000, true, "10.0.0.0/8")
	flags := []Pool{mkPool(b, "big", []string{"10.0.0.0/8"}, noAutoAssign)}
	b.Run("flags-only", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			flags[0].AutoAssign = i%2 == 0
			a.SetPools(flags)
		}
	})
	b.Run("ranges-changed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			extra := fmt.Sprintf("192.168.%d.0/24", i%2)
			a.SetPools([]Pool{mkPool(b, "big", []string{"10.0.0.0/8", extra})})
		}
	})
}
