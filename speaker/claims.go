package speaker

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// RebalanceAnnotation on a Service asks for its IPs to move, once, to the node the
// hash places them on: an IP stays with the node announcing it (no fail-back) only
// while that node's claim carries the annotation's current value. `herald rebalance`
// sets it to the current time.
const RebalanceAnnotation = "herald.dev/rebalance"

// Claims are the IPs one speaker announces, each with the rebalance token of its
// Services when the speaker last elected itself for it. Speakers publish their claims
// to each other (members.Publish): they are the incumbents of the election.
type Claims map[netip.Addr]string

// Encode writes the claims as sorted "ip token" lines.
func (c Claims) Encode() []byte {
	var b bytes.Buffer
	for _, ip := range slices.SortedFunc(maps.Keys(c), netip.Addr.Compare) {
		b.WriteString(ip.String())
		if t := c[ip]; t != "" {
			b.WriteByte(' ')
			b.WriteString(t)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// DecodeClaims reads what Encode wrote.
func DecodeClaims(data []byte) (Claims, error) {
	c := Claims{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		addr, token, _ := strings.Cut(line, " ")
		ip, err := netip.ParseAddr(addr)
		if err != nil {
			return nil, fmt.Errorf("claims: %q: %w", line, err)
		}
		c[ip.Unmap()] = token
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	return c, nil
}

// rebalanceTokens returns, per LoadBalancer IP, the rebalance token of the Services
// holding it: their annotations' values, sorted and comma-joined ("" without any).
func rebalanceTokens(services []*corev1.Service) map[netip.Addr]string {
	values := map[netip.Addr][]string{}
	for _, svc := range services {
		v := svc.Annotations[RebalanceAnnotation]
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

// incumbents returns, per IP, the one node whose claim on it carries the IP's current
// token; IPs claimed by several such nodes (a move under way) or by none have no
// incumbent and are placed by the hash.
func incumbents(claims map[string]Claims, tokens map[netip.Addr]string) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	several := map[netip.Addr]bool{}
	for node, c := range claims {
		for ip, token := range c {
			if want, ok := tokens[ip]; !ok || want != token || several[ip] {
				continue
			}
			if _, taken := out[ip]; taken {
				delete(out, ip)
				several[ip] = true
				continue
			}
			out[ip] = node
		}
	}
	return out
}

// ownClaims are the claims of a speaker announcing owned, under the current tokens.
func ownClaims(owned []netip.Addr, tokens map[netip.Addr]string) Claims {
	c := make(Claims, len(owned))
	for _, ip := range owned {
		c[ip] = tokens[ip]
	}
	return c
}
