package netlab

import (
	"fmt"
	"regexp"
	"strings"
)

const (
	bridgeSuffix = "br"   // the bridge namespace is <prefix>br
	bridgeName   = "br0"  // the bridge inside it
	hostLink     = "eth0" // the host's end of its veth pair, named as in a kind node
	maxHostName  = 14     // the bridge-side peer is "v"+name and interface names have 15 bytes
)

var (
	prefixRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,30}-$`)
	hostRE   = regexp.MustCompile(`^[a-z0-9]+$`)
	procRE   = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)
)

// checkPrefix enforces the naming rule that lets Cleanup find a lab's namespaces by name
// alone without touching anybody else's (see the package comment).
func checkPrefix(prefix string) error {
	if !prefixRE.MatchString(prefix) {
		return fmt.Errorf("netlab prefix %q: want at least 3 characters from [a-z0-9-] ending in \"-\", like \"hl-\"", prefix)
	}
	return nil
}

func checkHostName(name string) error {
	switch {
	case !hostRE.MatchString(name):
		return fmt.Errorf("netlab host name %q: want [a-z0-9]+ (no \"-\", which would make it look like another lab's prefix)", name)
	case len(name) > maxHostName:
		return fmt.Errorf("netlab host name %q: longer than %d characters", name, maxHostName)
	case name == bridgeSuffix:
		return fmt.Errorf("netlab host name %q: reserved for the bridge namespace", name)
	}
	return nil
}

// ownedBy reports whether the namespace ns belongs to a lab with this prefix.
func ownedBy(prefix, ns string) bool {
	rest, ok := strings.CutPrefix(ns, prefix)
	return ok && hostRE.MatchString(rest)
}

// peerName is the bridge-side end of a host's veth pair.
func peerName(host string) string { return "v" + host }
