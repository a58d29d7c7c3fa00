package handover

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Table is the name of herald's handover table in the ip and ip6 families.
const Table = "herald-handover"

// Forward is one VIP whose unknown TCP segments go to the node that announced it before.
type Forward struct {
	IP   netip.Addr // the VIP
	From string     // the node that gave it up
	To   netip.Addr // that node's address, of the VIP's family, on the VIP's network
	// Why the VIP moved, for Events and logs.
	Why          string
	Since, Until time.Time
}

func family(ip netip.Addr) string {
	if ip.Is4() {
		return "ip"
	}
	return "ip6"
}

// names returns the names of the chain and the set of the VIP ip.
func names(ip netip.Addr) (chain, set string) {
	s := strings.NewReplacer(".", "-", ":", "-").Replace(ip.String())
	return "vip-" + s, "flows-" + s
}

// startScript is the nft script that begins forwarding f: it (re)creates the VIP's set
// and chain. The set's timeout outlives any drain period: elements leave with the set.
func startScript(f Forward) string {
	fam := family(f.IP)
	chain, set := names(f.IP)
	addr, elem := "ipv4_addr", "ip"
	if fam == "ip6" {
		addr = "ipv6_addr"
		elem = "ip6"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "add table %s %s\n", fam, Table)
	fmt.Fprintf(&b, "add set %s %s %s { type %s . inet_service . %s . inet_service; flags dynamic,timeout; timeout 1d; }\n",
		fam, Table, set, addr, addr)
	fmt.Fprintf(&b, "add chain %s %s %s { type filter hook prerouting priority mangle; policy accept; }\n", fam, Table, chain)
	fmt.Fprintf(&b, "flush chain %s %s %s\n", fam, Table, chain)
	fmt.Fprintf(&b, "add rule %s %s %s %s daddr %s tcp flags & (fin|syn|rst|ack) != syn ct state new,invalid "+
		"update @%s { %s saddr . tcp sport . %s daddr . tcp dport } counter dup to %s drop\n",
		fam, Table, chain, elem, f.IP, set, elem, elem, f.To)
	return b.String()
}

// endScript is the nft script that ends forwarding ip; nft fails if it was not begun.
func endScript(ip netip.Addr) string {
	fam := family(ip)
	chain, set := names(ip)
	return fmt.Sprintf("delete chain %s %s %s\ndelete set %s %s %s\n", fam, Table, chain, fam, Table, set)
}

// resetScript removes both handover tables, whatever they hold: a speaker starting
// knows of no handover.
func resetScript() string {
	var b strings.Builder
	for _, fam := range []string{"ip", "ip6"} {
		fmt.Fprintf(&b, "add table %s %s\ndelete table %s %s\n", fam, Table, fam, Table)
	}
	return b.String()
}
