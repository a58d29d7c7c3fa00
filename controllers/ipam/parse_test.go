package ipam

import (
	"strings"
	"testing"
)

func TestParseAddresses(t *testing.T) {
	cases := []struct {
		name    string
		in      []string
		want    []string // ranges as from-to
		errText string
	}{
		{name: "v4 CIDR", in: []string{"192.168.10.0/24"}, want: []string{"192.168.10.0-192.168.10.255"}},
		{name: "v6 CIDR", in: []string{"fc00::/124"}, want: []string{"fc00::-fc00::f"}},
		{name: "host bits are masked", in: []string{"192.168.10.77/24"}, want: []string{"192.168.10.0-192.168.10.255"}},
		{name: "/32", in: []string{"10.0.0.1/32"}, want: []string{"10.0.0.1-10.0.0.1"}},
		{name: "v4 range", in: []string{"172.18.255.200-172.18.255.250"}, want: []string{"172.18.255.200-172.18.255.250"}},
		{name: "range with spaces", in: []string{" fc00::1 - fc00::ff "}, want: []string{"fc00::1-fc00::ff"}},
		{name: "one-address range", in: []string{"10.0.0.1-10.0.0.1"}, want: []string{"10.0.0.1-10.0.0.1"}},
		{name: "declaration order kept", in: []string{"10.0.1.0/24", "10.0.0.0/24", "fc00::/120"},
			want: []string{"10.0.1.0-10.0.1.255", "10.0.0.0-10.0.0.255", "fc00::-fc00::ff"}},
		{name: "overlaps are not this function's business", in: []string{"10.0.0.0/24", "10.0.0.5-10.0.0.9"},
			want: []string{"10.0.0.0-10.0.0.255", "10.0.0.5-10.0.0.9"}},
		{name: "empty list", in: nil, want: nil},

		{name: "bare IP", in: []string{"1.2.3.4"}, errText: `invalid address entry "1.2.3.4": a single address needs a prefix length, e.g. 1.2.3.4/32`},
		{name: "bare v6", in: []string{"fc00::1"}, errText: "fc00::1/128"},
		{name: "garbage", in: []string{"pool"}, errText: "neither a CIDR nor a start-end range"},
		{name: "empty entry", in: []string{" "}, errText: "empty"},
		{name: "bad CIDR", in: []string{"10.0.0.0/33"}, errText: "not a CIDR"},
		{name: "start after end", in: []string{"10.0.0.9-10.0.0.1"}, errText: "range start 10.0.0.9 is after its end 10.0.0.1"},
		{name: "mixed families", in: []string{"10.0.0.1-fc00::1"}, errText: "mixes IPv4 and IPv6"},
		{name: "bad start", in: []string{"10.0.0-10.0.0.1"}, errText: `range start "10.0.0" is not an IP address`},
		{name: "bad end", in: []string{"10.0.0.1-"}, errText: `range end "" is not an IP address`},
		{name: "zone in range", in: []string{"fe80::1%eth0-fe80::2%eth0"}, errText: "zones"},
		{name: "zone in CIDR", in: []string{"fe80::%eth0/64"}, errText: "zones"},
		{name: "mapped v4 CIDR", in: []string{"::ffff:10.0.0.0/120"}, errText: "IPv4-mapped"},
		{name: "mapped v4 range", in: []string{"::ffff:10.0.0.1-::ffff:10.0.0.9"}, errText: "IPv4-mapped"},
		{name: "range spanning mapped space", in: []string{"::1-::1:0:0:0"}, errText: "IPv4-mapped"},
		{name: "CIDR and range glued", in: []string{"10.0.0.0/24-10.0.1.0/24"}, errText: "not an IP address"},
		{name: "second entry named", in: []string{"10.0.0.0/24", "nope"}, errText: `"nope"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseAddresses(c.in)
			if c.errText != "" {
				if err == nil || !strings.Contains(err.Error(), c.errText) {
					t.Fatalf("error %v, want it to contain %q", err, c.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i, r := range got {
				if r.String() != c.want[i] {
					t.Fatalf("range %d = %s, want %s", i, r, c.want[i])
				}
			}
		})
	}
}

func FuzzParseAddresses(f *testing.F) {
	for _, s := range []string{
		"192.168.10.0/24", "fc00::/124", "172.18.255.200-172.18.255.250", "fc00::1 - fc00::ff",
		"1.2.3.4", "1.2.3.4/32", "::ffff:1.2.3.4/128", "fe80::1%eth0-fe80::2", "10.0.0.9-10.0.0.1",
		"0.0.0.0/0", "::/0", "10.0.0.1-fc00::1", " - ", "10.0.0.0/24-10.0.1.0/24",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Entries are split on a separator so one input can test several entries.
		entries := strings.Split(s, ",")
		rs, err := ParseAddresses(entries)
		if err != nil {
			if rs != nil {
				t.Fatalf("ranges %v returned with error %v", rs, err)
			}
			return
		}
		if len(rs) != len(entries) {
			t.Fatalf("%d ranges for %d entries", len(rs), len(entries))
		}
		for _, r := range rs {
			if !r.IsValid() || r.To().Less(r.From()) || r.From().Zone() != "" {
				t.Fatalf("invalid range %v from %q", r, s)
			}
			if r.Overlaps(mappedIPv4) {
				t.Fatalf("range %v holds IPv4-mapped addresses", r)
			}
			back, err := ParseAddresses([]string{r.From().String() + "-" + r.To().String()})
			if err != nil || len(back) != 1 || back[0] != r {
				t.Fatalf("range %v does not round-trip: %v %v", r, back, err)
			}
			if p, ok := r.Prefix(); ok {
				back, err := ParseAddresses([]string{p.String()})
				if err != nil || back[0] != r {
					t.Fatalf("prefix %v of %v does not round-trip: %v %v", p, r, back, err)
				}
			}
		}
	})
}
