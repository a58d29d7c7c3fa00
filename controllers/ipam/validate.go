package ipam

import (
	"net/netip"
	"slices"
	"strings"
)

// wantedFamilies are the families svc should get an IP of, primary first.
func wantedFamilies(svc Service) []Family {
	if svc.Policy == SingleStack && len(svc.Families) > 1 {
		return svc.Families[:1]
	}
	return svc.Families
}

// normalizeService returns svc with requested IPs in the form pools use.
func normalizeService(svc Service) Service {
	if len(svc.RequestedIPs) > 0 {
		ips := make([]netip.Addr, len(svc.RequestedIPs))
		for i, ip := range svc.RequestedIPs {
			ips[i] = normalizeAddr(ip)
		}
		svc.RequestedIPs = ips
	}
	return svc
}

// validateService checks the shape of what svc asks for, before any pool is looked at.
func validateService(svc Service) error {
	if svc.Key == "" {
		return newError(ErrInvalidService, "Service has no key")
	}
	switch {
	case len(svc.Families) == 0 || len(svc.Families) > 2:
		return newError(ErrInvalidService, "Service needs one or two ipFamilies, has %d", len(svc.Families))
	case len(svc.Families) == 2 && svc.Families[0] == svc.Families[1]:
		return newError(ErrInvalidService, "Service lists ipFamily %s twice", svc.Families[0])
	case svc.Policy == RequireDualStack && len(svc.Families) < 2:
		return newError(ErrInvalidService, "RequireDualStack needs two ipFamilies, the Service has only %s", svc.Families[0])
	}
	for _, f := range svc.Families {
		if f != IPv4 && f != IPv6 {
			return newError(ErrInvalidService, "unknown IP family %d", int(f))
		}
	}
	return validateRequestedIPs(svc)
}

func validateRequestedIPs(svc Service) error {
	wanted := wantedFamilies(svc)
	var seen []Family
	for _, ip := range svc.RequestedIPs {
		if !ip.IsValid() {
			return newError(ErrInvalidService, "requested IP is not a valid address")
		}
		f := FamilyOf(ip)
		if slices.Contains(seen, f) {
			return newError(ErrInvalidService, "more than one %s address requested (%s); request at most one per family", f, JoinIPs(svc.RequestedIPs))
		}
		seen = append(seen, f)
		if !slices.Contains(wanted, f) {
			return newError(ErrInvalidService, "requested IP %s is %s but the Service only wants %s", ip, f, familyList(wanted))
		}
	}
	if svc.Policy == RequireDualStack && len(svc.RequestedIPs) == 1 {
		return newError(ErrInvalidService, "RequireDualStack Service requests only %s; request one IP of each family, or none", svc.RequestedIPs[0])
	}
	return nil
}

// validateRestored checks IPs read back from Service.status.
func validateRestored(svc Service, ips []netip.Addr) ([]netip.Addr, error) {
	if svc.Key == "" {
		return nil, newError(ErrInvalidService, "Service has no key")
	}
	if len(ips) == 0 || len(ips) > 2 {
		return nil, newError(ErrInvalidService, "Service status has %d IPs, want 1 or 2", len(ips))
	}
	out := make([]netip.Addr, len(ips))
	for i, ip := range ips {
		if !ip.IsValid() {
			return nil, newError(ErrInvalidService, "Service status has an invalid IP")
		}
		out[i] = normalizeAddr(ip)
	}
	if len(out) == 2 && FamilyOf(out[0]) == FamilyOf(out[1]) {
		return nil, newError(ErrInvalidService, "Service status has two %s addresses (%s)", FamilyOf(out[0]), JoinIPs(out))
	}
	return out, nil
}

// JoinIPs writes addresses as users read them in Events: "10.0.0.1, fd00::1".
func JoinIPs(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ", ")
}

func familyList(fs []Family) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.String()
	}
	return strings.Join(s, " and ")
}
