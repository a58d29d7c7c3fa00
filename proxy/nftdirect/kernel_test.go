package nftdirect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/netns"
)

// kernelFamily is what the kernel test writes in one family.
type kernelFamily struct {
	name     string // nft family
	addr     func(r *rand.Rand) string
	hostPort func(addr string, port int) string
}

var kernelFamilies = []kernelFamily{
	{"ip", func(r *rand.Rand) string { return fmt.Sprintf("10.%d.%d.%d", r.IntN(256), r.IntN(256), 1+r.IntN(254)) },
		func(a string, p int) string { return fmt.Sprintf("%s:%d", a, p) }},
	{"ip6", func(r *rand.Rand) string { return fmt.Sprintf("fd00:10:244:%x::%x", r.IntN(65536), 1+r.IntN(65535)) },
		func(a string, p int) string { return fmt.Sprintf("[%s]:%d", a, p) }},
}

// setup is the table both namespaces start from, written by nft: chains to jump to
// and an affinity set as kube-proxy declares it.
func (f kernelFamily) setup() string {
	addrType := map[string]string{"ip": "ipv4_addr", "ip6": "ipv6_addr"}[f.name]
	var b strings.Builder
	fmt.Fprintf(&b, "add table %s herald\n", f.name)
	fmt.Fprintf(&b, "add chain %s herald mark-for-masquerade\n", f.name)
	for i := range 10 {
		fmt.Fprintf(&b, "add chain %s herald c%d\n", f.name, i)
	}
	fmt.Fprintf(&b, "add set %s herald affinity-x { type %s ; flags dynamic,timeout ; timeout 3h ; }\n", f.name, addrType)
	fmt.Fprintf(&b, "add set %s herald hairpin-connections { type %s . %s . inet_proto . inet_service ; comment \"service hairpin connections\" ; }\n",
		f.name, addrType, addrType)
	return b.String()
}

// randomScript is one transaction of the forms Compile accepts: chain c rewritten
// (add, flush, rules), hairpin elements added and deleted (elements holds those in the
// set), a scratch chain created, and sometimes the previous one deleted. Rules in cK
// only go to cJ with J > K, so no loop can form.
func (f kernelFamily) randomScript(r *rand.Rand, round int, elements *[]string) string {
	var b strings.Builder
	for range r.IntN(4) {
		if len(*elements) > 0 && r.IntN(2) == 0 {
			i := r.IntN(len(*elements))
			fmt.Fprintf(&b, "delete element %s herald hairpin-connections { %s }\n", f.name, (*elements)[i])
			*elements = slices.Delete(*elements, i, i+1)
			continue
		}
		a := f.addr(r)
		e := fmt.Sprintf("%s . %s . %s . %d", a, a, []string{"tcp", "udp", "sctp"}[r.IntN(3)], 1+r.IntN(65535))
		if !slices.Contains(*elements, e) {
			fmt.Fprintf(&b, "add element %s herald hairpin-connections { %s }\n", f.name, e)
			*elements = append(*elements, e)
		}
	}
	k := r.IntN(9)
	c := fmt.Sprintf("c%d", k)
	target := func() string {
		if r.IntN(4) == 0 {
			return "mark-for-masquerade"
		}
		return fmt.Sprintf("c%d", k+1+r.IntN(9-k))
	}
	fmt.Fprintf(&b, "add chain %s herald %s\n", f.name, c)
	fmt.Fprintf(&b, "flush chain %s herald %s\n", f.name, c)
	protos := []string{"tcp", "udp", "sctp"}
	for range 1 + r.IntN(12) {
		var rule string
		pick := fmt.Sprintf("numgen random mod %d 0 ", 2+r.IntN(30))
		if r.IntN(3) == 0 {
			pick = ""
		}
		switch r.IntN(6) {
		case 0, 1:
			rule = fmt.Sprintf("%smeta l4proto %s dnat to %s", pick, protos[r.IntN(3)], f.hostPort(f.addr(r), 1+r.IntN(65535)))
		case 2:
			rule = fmt.Sprintf("%s saddr @affinity-x goto %s", f.name, target())
		case 3:
			rule = fmt.Sprintf("update @affinity-x { %s saddr }", f.name)
		case 4:
			rule = fmt.Sprintf("%sgoto %s", pick, target())
		case 5:
			rule = fmt.Sprintf("%sjump %s", pick, target())
		}
		if r.IntN(5) == 0 {
			rule += fmt.Sprintf(" comment %q", fmt.Sprintf("ns%d/svc-%d:port has spaces", r.IntN(10), round))
		}
		fmt.Fprintf(&b, "add rule %s herald %s %s\n", f.name, c, rule)
	}
	fmt.Fprintf(&b, "add chain %s herald scratch-%d\n", f.name, round)
	if round > 0 && r.IntN(2) == 0 {
		fmt.Fprintf(&b, "delete chain %s herald scratch-%d\n", f.name, round-1)
	}
	return b.String()
}

func nftIn(t *testing.T, ns, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), "ip", append([]string{"netns", "exec", ns, "nft"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nft %v in %s: %v\n%s\n%s", args, ns, err, out, stdin)
	}
	return string(out)
}

// sortElements sorts each run of set element lines of nft's debug listing: the kernel
// hashes elements with a seed of each set's own, so their order differs between
// namespaces.
func sortElements(listing string) string {
	lines := strings.Split(listing, "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "element ") {
			j++
		}
		slices.Sort(lines[i:j])
		i = max(j, i+1)
	}
	return strings.Join(lines, "\n")
}

// dumpRules is every rule of table herald as the kernel dumps it (chain, expressions
// with their data bytes, user data), then every set's element keys.
func dumpRules(t *testing.T, ns, family string) string {
	t.Helper()
	fam := map[string]nftables.TableFamily{"ip": nftables.TableFamilyIPv4, "ip6": nftables.TableFamilyIPv6}[family]
	var b strings.Builder
	err := netns.Do(ns, func() error {
		conn, err := nftables.New()
		if err != nil {
			return err
		}
		chains, err := conn.ListChainsOfTableFamily(fam)
		if err != nil {
			return err
		}
		slices.SortFunc(chains, func(x, y *nftables.Chain) int { return strings.Compare(x.Name, y.Name) })
		for _, c := range chains {
			rules, err := conn.GetRules(c.Table, c)
			if err != nil {
				return fmt.Errorf("chain %s: %w", c.Name, err)
			}
			for _, r := range rules {
				fmt.Fprintf(&b, "%s:", c.Name)
				for _, e := range r.Exprs {
					fmt.Fprintf(&b, " %T%+v", e, e)
				}
				fmt.Fprintf(&b, " userdata %q\n", r.UserData)
			}
		}
		table := &nftables.Table{Name: "herald", Family: fam}
		sets, err := conn.GetSets(table)
		if err != nil {
			return err
		}
		slices.SortFunc(sets, func(x, y *nftables.Set) int { return strings.Compare(x.Name, y.Name) })
		for _, set := range sets {
			elements, err := conn.GetSetElements(set)
			if err != nil {
				return fmt.Errorf("set %s: %w", set.Name, err)
			}
			var keys []string
			for _, e := range elements {
				keys = append(keys, fmt.Sprintf("%x", e.Key))
			}
			slices.Sort(keys)
			fmt.Fprintf(&b, "set %s: %v\n", set.Name, keys)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("dumping rules in %s: %v", ns, err)
	}
	return b.String()
}

func applyIn(t *testing.T, ns, script string) {
	t.Helper()
	b, err := Compile(script)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if err := netns.Do(ns, func() error { return applyOnce(b) }); err != nil {
		t.Fatalf("netlink in %s: %v\n%s", ns, err, script)
	}
}

// applyOnce sends b over a socket of its own in the calling thread's namespace, and
// closes it.
func applyOnce(b *Batch) error {
	c, err := Open()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Apply(b)
}

// openIn opens a Conn in namespace ns, closed when the test ends.
func openIn(t *testing.T, ns string) *Conn {
	t.Helper()
	var c *Conn
	if err := netns.Do(ns, func() (err error) {
		c, err = Open()
		return err
	}); err != nil {
		t.Fatalf("netlink socket in %s: %v", ns, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestMatchesNFT applies the same random transactions with nft in one namespace and
// over netlink in another, and requires equal tables after each: rules, comments and
// the expressions the kernel holds (nft --debug=netlink prints them).
func TestMatchesNFT(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft is needed (Debian package nftables): %v", err)
	}
	viaNFT, viaNetlink := "hnd-nft", "hnd-netlink"
	labtest.Namespaces(t, viaNFT, viaNetlink)
	for _, f := range kernelFamilies {
		t.Run(f.name, func(t *testing.T) {
			for _, ns := range []string{viaNFT, viaNetlink} {
				nftIn(t, ns, f.setup(), "-f", "-")
			}
			// One socket for every round, as the proxier keeps it; it is used from
			// whatever thread runs the test, and stays in its namespace.
			conn := openIn(t, viaNetlink)
			r := rand.New(rand.NewPCG(1, uint64(len(f.name))))
			var elements []string
			for round := range 40 {
				script := f.randomScript(r, round, &elements)
				nftIn(t, viaNFT, script, "-f", "-")
				b, err := Compile(script)
				if err != nil {
					t.Fatalf("compile: %v", err)
				}
				if err := conn.Apply(b); err != nil {
					t.Fatalf("round %d: netlink: %v\n%s", round, err, script)
				}
				want := sortElements(nftIn(t, viaNFT, "", "--debug=netlink", "list", "table", f.name, "herald"))
				got := sortElements(nftIn(t, viaNetlink, "", "--debug=netlink", "list", "table", f.name, "herald"))
				if got != want {
					t.Fatalf("round %d: over netlink the kernel holds\n%s\nnft made\n%s\nafter\n%s", round, got, want, script)
				}
				// nft prints registers in 32-bit words, which hides a data length:
				// compare the expressions as the kernel dumps them too.
				if got, want := dumpRules(t, viaNetlink, f.name), dumpRules(t, viaNFT, f.name); got != want {
					t.Fatalf("round %d: over netlink the kernel dumps\n%s\nnft made\n%s\nafter\n%s", round, got, want, script)
				}
			}
			for _, ns := range []string{viaNFT, viaNetlink} {
				nftIn(t, ns, "", "delete", "table", f.name, "herald")
			}
		})
	}
}

// TestMatchesNFTCanFail: the comparison above sees a one-byte difference (a port),
// and a failed batch changes nothing (the transaction is atomic).
func TestMatchesNFTCanFail(t *testing.T) {
	a, b := "hnd-fail-a", "hnd-fail-b"
	labtest.Namespaces(t, a, b)
	f := kernelFamilies[0]
	for _, ns := range []string{a, b} {
		nftIn(t, ns, f.setup(), "-f", "-")
	}
	nftIn(t, a, "add rule ip herald c1 meta l4proto tcp dnat to 10.0.0.1:8080\n", "-f", "-")
	applyIn(t, b, "add rule ip herald c1 meta l4proto tcp dnat to 10.0.0.1:8081\n")
	if nftIn(t, a, "", "--debug=netlink", "list", "table", "ip", "herald") ==
		nftIn(t, b, "", "--debug=netlink", "list", "table", "ip", "herald") {
		t.Error("tables with different dnat ports listed equal")
	}

	before := nftIn(t, b, "", "--debug=netlink", "list", "table", "ip", "herald")
	bad, err := Compile("add rule ip herald c2 meta l4proto tcp dnat to 10.0.0.2:80\nadd rule ip herald missing goto c3\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Do(b, func() error { return applyOnce(bad) }); err == nil {
		t.Fatal("a rule in a chain that does not exist was accepted")
	}
	if err := openIn(t, b).Apply(bad); err == nil {
		t.Fatal("a rule in a chain that does not exist was accepted over a kept socket")
	}
	if after := nftIn(t, b, "", "--debug=netlink", "list", "table", "ip", "herald"); after != before {
		t.Errorf("a failed batch changed the table:\n%s\nwas\n%s", after, before)
	}
}
