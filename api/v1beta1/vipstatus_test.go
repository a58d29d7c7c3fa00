package v1beta1_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

func TestVIPStatusName(t *testing.T) {
	for ip, want := range map[string]string{
		"172.18.255.200":       "ip-172-18-255-200",
		"::ffff:10.0.0.1":      "ip-10-0-0-1", // the IPv4 address it maps
		"fd00::1":              "ip-fd00--1",
		"fd00::":               "ip-fd00--0", // fd00::0: a name ends with a letter or digit
		"::1":                  "ip---1",
		"2001:db8:0:0:1:0:0:1": "ip-2001-db8--1-0-0-1",
		"fe80::1%eth0":         "ip-fe80--1", // zones are not part of a LoadBalancer IP
	} {
		got := heraldv1.VIPStatusName(netip.MustParseAddr(ip))
		if got != want {
			t.Errorf("VIPStatusName(%s) = %q, want %q", ip, got, want)
		}
	}
}

// Every IP gets a valid object name, and distinct IPs distinct names.
func TestVIPStatusNameValidAndDistinct(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	seen := map[string]netip.Addr{}
	check := func(ip netip.Addr) {
		name := heraldv1.VIPStatusName(ip)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("VIPStatusName(%s) = %q: %v", ip, name, errs)
		}
		if other, dup := seen[name]; dup && other != ip {
			t.Errorf("%s and %s both get name %q", ip, other, name)
		}
		seen[name] = ip
	}
	for range 20000 {
		var b [16]byte
		for i := range b {
			// Mostly zero bytes, so that "::" shows up at the start, middle and end.
			if rnd.IntN(3) == 0 {
				b[i] = byte(rnd.IntN(256))
			}
		}
		check(netip.AddrFrom16(b).Unmap())
		check(netip.AddrFrom4([4]byte{b[0], b[1], b[2], b[3]}))
	}
}
