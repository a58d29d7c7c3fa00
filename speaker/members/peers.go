package members

import (
	"net"
	"slices"
	"strconv"
)

// PeersToJoin returns the candidates worth a Join: those that are neither self nor
// already live, as sorted, de-duplicated "host:port". Candidates without a port get
// DefaultBindPort; live and self are compared the same way. Empty and malformed
// candidates are dropped.
func PeersToJoin(candidates []string, live []string, self string) []string {
	skip := map[string]bool{}
	for _, a := range live {
		if n, ok := normalizeAddr(a); ok {
			skip[n] = true
		}
	}
	if n, ok := normalizeAddr(self); ok {
		skip[n] = true
	}
	var out []string
	for _, c := range candidates {
		n, ok := normalizeAddr(c)
		if !ok || skip[n] {
			continue
		}
		skip[n] = true
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// normalizeAddr turns "ip" or "ip:port" into "ip:port" (IPv6 bracketed).
func normalizeAddr(a string) (string, bool) {
	if a == "" {
		return "", false
	}
	host, port := a, strconv.Itoa(DefaultBindPort)
	if h, p, err := net.SplitHostPort(a); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
			return "", false
		}
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	} else if host == "" {
		return "", false
	}
	return net.JoinHostPort(host, port), true
}
