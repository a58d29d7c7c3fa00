package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"go4.org/netipx"
)

// mappedIPv4 holds the IPv4-mapped IPv6 addresses. Pools may not contain them: netip
// would treat such an address as IPv6 while Kubernetes and FamilyOf treat it as IPv4.
var mappedIPv4 = netipx.RangeOfPrefix(netip.MustParsePrefix("::ffff:0:0/96"))

// ParseAddresses parses IPAddressPool spec.addresses. Each entry is a CIDR
// ("192.168.10.0/24", host bits allowed and masked off) or a range "start-end" (spaces
// around the dash allowed). A bare IP is refused: write "1.2.3.4/32". The ranges are
// returned in declaration order.
func ParseAddresses(addrs []string) ([]netipx.IPRange, error) {
	out := make([]netipx.IPRange, 0, len(addrs))
	for _, entry := range addrs {
		r, err := parseAddressEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("invalid address entry %q: %w", entry, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseAddressEntry(entry string) (netipx.IPRange, error) {
	s := strings.TrimSpace(entry)
	if s == "" {
		return netipx.IPRange{}, errors.New("empty")
	}
	if strings.Contains(s, "%") {
		return netipx.IPRange{}, errors.New("zones (%) are not allowed")
	}
	var r netipx.IPRange
	switch from, to, isRange := strings.Cut(s, "-"); {
	case isRange:
		var err error
		if r, err = parseRange(strings.TrimSpace(from), strings.TrimSpace(to)); err != nil {
			return netipx.IPRange{}, err
		}
	case strings.Contains(s, "/"):
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netipx.IPRange{}, fmt.Errorf("not a CIDR: %w", err)
		}
		r = netipx.RangeOfPrefix(p.Masked())
	default:
		if a, err := netip.ParseAddr(s); err == nil {
			return netipx.IPRange{}, fmt.Errorf("a single address needs a prefix length, e.g. %s/%d", a, a.BitLen())
		}
		return netipx.IPRange{}, errors.New("neither a CIDR nor a start-end range")
	}
	if r.From().Is4In6() || r.To().Is4In6() || r.Overlaps(mappedIPv4) {
		return netipx.IPRange{}, fmt.Errorf("IPv4-mapped IPv6 addresses (%s) are not allowed; write IPv4 addresses as IPv4", rangeString(mappedIPv4))
	}
	return r, nil
}

func parseRange(fromText, toText string) (netipx.IPRange, error) {
	from, err := netip.ParseAddr(fromText)
	if err != nil {
		return netipx.IPRange{}, fmt.Errorf("range start %q is not an IP address", fromText)
	}
	to, err := netip.ParseAddr(toText)
	if err != nil {
		return netipx.IPRange{}, fmt.Errorf("range end %q is not an IP address", toText)
	}
	if from.Is4() != to.Is4() {
		return netipx.IPRange{}, fmt.Errorf("range mixes IPv4 and IPv6 (%s, %s)", from, to)
	}
	if to.Less(from) {
		return netipx.IPRange{}, fmt.Errorf("range start %s is after its end %s", from, to)
	}
	return netipx.IPRangeFrom(from, to), nil
}
