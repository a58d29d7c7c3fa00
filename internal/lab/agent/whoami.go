package agent

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// whoami answers every request the way traefik/whoami (the walkthrough's image) does:
// the pod's hostname, its addresses, the peer that connected, and the request as it
// arrived. The demo counts the Hostname lines; the tests read RemoteAddr to see whether
// the client's source address survived the proxier.
type whoami struct {
	hostname string
	ips      []string
}

func (w whoami) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(rw, w.body(r))
}

func (w whoami) body(r *http.Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Hostname: %s\n", w.hostname)
	for _, ip := range w.ips {
		fmt.Fprintf(&b, "IP: %s\n", ip)
	}
	fmt.Fprintf(&b, "RemoteAddr: %s\n", r.RemoteAddr)
	fmt.Fprintf(&b, "%s %s %s\n", r.Method, r.URL.RequestURI(), r.Proto)
	fmt.Fprintf(&b, "Host: %s\n", r.Host)
	// Go's server takes Host out of the header map; the rest is printed sorted, as the
	// original's header dump is.
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range r.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	return b.String()
}
