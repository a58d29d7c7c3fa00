//go:build linux

package compare

// TestNFTOracleCompare is the oracle test of herald's nftables proxier
// (herald.dev/herald/proxy/nftables): the random worlds and change sequences of
// TestOracleCompare, fed to kube-proxy v1.36.3's nftables proxier (package nftoracle, on
// knftables.Fake) and to herald's nftables.Table the way herald's runner drives it
// (proxy/nftsync.go: full sync first and when forced, otherwise the Services
// model.ChangedServices names, stale chains deleted in a transaction of their own).
// After every sync, for each family:
//
//  1. End state: the two tables are equal after nftCanonical (nftDeliberateDifferences).
//  2. Partial syncs: every chain herald's transaction writes rules to is one kube-proxy's
//     transaction of the same step writes too: herald rewrites no more than kube-proxy.
//  3. Every transaction of both is accepted by the Fake (which checks, as the kernel
//     would, that objects exist and that chains are unused when deleted), and herald
//     reports no problems for the valid input.
//
// Seeds and steps: HERALD_ORACLE_SEEDS and HERALD_ORACLE_STEPS, as TestOracleCompare.
// TestNFTComparisonDetectsChanges checks that nftCanonical hides nothing else.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/knftables"

	"herald.dev/herald/hack/kporacle/nftoracle"
	"herald.dev/herald/proxy/model"
	"herald.dev/herald/proxy/nftables"
)

// nftDeliberateDifferences lists every way the nftables comparison departs from equal
// dumps, and why.
var nftDeliberateDifferences = []struct{ what, why string }{
	{
		"Table: herald's table is \"herald\" with its own comment, kube-proxy's \"kube-proxy\" " +
			"(nftCanonical names both TABLE and drops the table comment)",
		"the two must be able to run side by side on one node (herald stays off while kube-proxy's " +
			"table exists, and removes its own when kube-proxy takes over), so they cannot share a name.",
	},
	{
		"Endpoint choice: kube-proxy's \"numgen random mod N map { 0 : ep0, ... }\" (DNAT) and " +
			"\"numgen random mod N vmap { 0 : goto ep0, ... }\" (session affinity) rules are " +
			"compared as herald's cascade: one rule per endpoint, \"numgen random mod (N-i) 0\" " +
			"before all but the last (nftCanonical translates kube-proxy's rule)",
		"each such rule is an anonymous set in the kernel, and the kernel names a new anonymous set by " +
			"scanning every set of the table: a table of 10,000 Services took kube-proxy 16-57 s to " +
			"load (BenchmarkKubeProxyNFTables). The cascade picks endpoint i of N with probability " +
			"1/(N-i) when the ones before it were not picked, which is uniform, the same endpoints in " +
			"the same order; it costs no set.",
	},
	{
		"Stale chains: service chains with no rules that nothing jumps to are left out of both " +
			"dumps (nftCanonical)",
		"both flush a chain that went out of use and delete it on a sync at least a second later " +
			"(kernels before 6.2 may still count a just-deleted map element's reference); kube-proxy " +
			"measures the second on the wall clock, herald on the clock its runner passes, here " +
			"two seconds per step. A full sync recreates herald's table, so it drops them at once.",
	},
	{
		"Session affinity timeout changes: kube-proxy's affinity sets are compared with the timeout " +
			"its last \"add set\" asked for (nftSide.kubeProxyAsked), not the one knftables.Fake kept; " +
			"herald deletes and re-adds a set whose timeout changed",
		"kube-proxy re-adds its sets on every sync, and since Linux 6.10 an \"add\" of an existing set " +
			"updates its timeout (checked on this machine's kernel); the Fake, like older kernels, keeps " +
			"the first one, so there a changed sessionAffinityConfig never takes effect in kube-proxy. " +
			"herald's way works on every kernel, at the cost of the clients' current affinities, " +
			"which a timeout change is meant to reset anyway.",
	},
	{
		"Element comments are left out of the table comparison (nftDiff); instead every element " +
			"kube-proxy's transaction adds must be in herald's table with the same comment",
		"kube-proxy rewrites an element only when its key or value changes (nftElementStorage), so " +
			"when a port of a Service without endpoints is renamed, its no-endpoint elements keep the " +
			"old \"ns/name:port\" comment; herald replaces them. (knftables.Fake updates a comment on " +
			"re-add, the kernel does not.)",
	},
	{
		"Elements of each set and map are compared sorted (nftoracle.SortElements on both sides)",
		"nftables keeps no element order; the Fake lists them in the order they were added.",
	},
}

// TestNFTDeliberateDifferences prints the list (go test -run NFTDeliberate -v).
func TestNFTDeliberateDifferences(t *testing.T) {
	for i, d := range nftDeliberateDifferences {
		if d.what == "" || d.why == "" {
			t.Errorf("deliberate difference %d lacks its description or its reason", i)
		}
		t.Logf("%d. %s\n   why: %s", i+1, d.what, d.why)
	}
}

func TestNFTOracleCompare(t *testing.T) {
	n := steps(t)
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runNFTSeed(t, seed, n) })
	}
}

// nftEnv is a node for the nftables comparison: env without the iptables-only flags,
// plus the cluster's ServiceCIDRs.
type nftEnv struct {
	env
	serviceCIDRs []string
}

func randomNFTEnv(r *rand.Rand) nftEnv {
	e := nftEnv{env: randomEnv(r)}
	if chance(r, 50) {
		e.serviceCIDRs = []string{"172.30.0.0/16", "fd00:30::/112"}
	}
	return e
}

func (e nftEnv) String() string {
	return fmt.Sprintf("nodeIPs=%v clusterCIDRs=%v bridge=%q ifPrefix=%q masqBit=%d masqAll=%v nodePortAddresses=%q zone=%q serviceCIDRs=%v",
		e.nodeIPs, e.clusterCIDRs, e.bridgeInterface, e.interfaceNamePrefix, e.masqueradeBit, e.masqueradeAll,
		e.nodePortAddresses, e.zone, e.serviceCIDRs)
}

// nodeIP is kube-proxy's node IP of the family: the first one, or the loopback
// address its server falls back to.
func (e nftEnv) nodeIP(fam model.Family) netip.Addr {
	if ip, ok := primaryIP(e.nodeIPs, fam); ok {
		return ip
	}
	if fam == model.IPv6 {
		return netip.IPv6Loopback()
	}
	return netip.MustParseAddr("127.0.0.1")
}

func (e nftEnv) oracleOptions(fam model.Family) nftoracle.Options {
	opts := nftoracle.Options{
		NodeName:            localNode,
		NodeIP:              net.IP(e.nodeIP(fam).AsSlice()),
		ClusterCIDRs:        e.clusterCIDRs,
		BridgeInterface:     e.bridgeInterface,
		InterfaceNamePrefix: e.interfaceNamePrefix,
		MasqueradeBit:       e.masqueradeBit,
		MasqueradeAll:       e.masqueradeAll,
		NodePortAddresses:   e.nodePortAddresses,
		ServiceCIDRs:        e.serviceCIDRs,
	}
	for _, ip := range e.nodeIPs {
		opts.InterfaceAddrs = append(opts.InterfaceAddrs, net.IP(ip.AsSlice()))
	}
	return opts
}

// heraldNode is e for herald's nftables generator (both families). The iptables
// comparison's Node carries the same facts; the fields kube-proxy's nftables mode has
// no use for (localhost NodePorts, random-fully, nfacct) are left out.
func (e nftEnv) heraldNode() nftables.Node {
	ipt := e.env.heraldNode()
	n := nftables.Node{
		Name:              ipt.Name,
		Zone:              ipt.Zone,
		IPs:               ipt.IPs,
		LocalDetector:     ipt.LocalDetector,
		MasqueradeBit:     ipt.MasqueradeBit,
		MasqueradeAll:     ipt.MasqueradeAll,
		NodePortAddresses: ipt.NodePortAddresses,
		InterfaceAddrs:    ipt.InterfaceAddrs,
	}
	for _, c := range e.serviceCIDRs {
		n.ServiceCIDRs = append(n.ServiceCIDRs, netip.MustParsePrefix(c))
	}
	return n
}

// nftSide is one family's pair: kube-proxy's nftables proxier and herald's Table with
// the Fake it programs.
type nftSide struct {
	fam    model.Family
	oracle *nftoracle.Oracle
	fake   *knftables.Fake
	table  *nftables.Table
	last   []model.Service // what herald's table was last synced to
	synced bool
	// asked holds, by affinity set, the last "add set" line kube-proxy ran for it.
	asked map[string]string
}

// kubeProxyAsked records the affinity sets kube-proxy's transactions add and delete.
func (s *nftSide) kubeProxyAsked(tx string) {
	for _, line := range strings.Split(tx, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != "set" || !strings.HasPrefix(f[4], "affinity-") {
			continue
		}
		switch f[0] {
		case "add":
			s.asked[f[4]] = line
		case "delete", "destroy":
			delete(s.asked, f[4])
		}
	}
}

// withAskedTimeouts writes kube-proxy's affinity sets into its dump as it asked for them.
func (s *nftSide) withAskedTimeouts(dump string) string {
	lines := strings.Split(dump, "\n")
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) >= 5 && f[0] == "add" && f[1] == "set" && s.asked[f[4]] != "" {
			lines[i] = s.asked[f[4]]
		}
	}
	return strings.Join(lines, "\n")
}

func newNFTSide(t *testing.T, e nftEnv, fam model.Family) *nftSide {
	o, err := nftoracle.New(e.oracleOptions(fam))
	if err != nil {
		t.Fatalf("nftoracle.New(%s): %v", fam, err)
	}
	if labels := e.topologyLabels(); labels != nil {
		o.OnTopologyChange(labels)
	}
	nftFam := knftables.IPv4Family
	if fam == model.IPv6 {
		nftFam = knftables.IPv6Family
	}
	return &nftSide{fam: fam, oracle: o, fake: knftables.NewFake(nftFam, nftables.TableName), table: nftables.NewTable(),
		asked: map[string]string{}}
}

func (s *nftSide) feed(events []event) {
	for _, ev := range events {
		switch {
		case ev.newSvc != nil && ev.oldSvc == nil:
			s.oracle.OnServiceAdd(ev.newSvc)
		case ev.newSvc != nil:
			s.oracle.OnServiceUpdate(ev.oldSvc, ev.newSvc)
		case ev.oldSvc != nil:
			s.oracle.OnServiceDelete(ev.oldSvc)
		case ev.newSlice != nil && ev.oldSlice == nil:
			s.oracle.OnEndpointSliceAdd(ev.newSlice)
		case ev.newSlice != nil:
			s.oracle.OnEndpointSliceUpdate(ev.oldSlice, ev.newSlice)
		default:
			s.oracle.OnEndpointSliceDelete(ev.oldSlice)
		}
	}
}

// syncHerald does what herald's runner does for one family (proxy/nftsync.go) and
// returns the sync's transaction text, "" when nothing was to be done.
func (s *nftSide) syncHerald(node nftables.Node, services []model.Service, full bool, now time.Time) (string, []model.Problem, error) {
	ctx := context.Background()
	var changed model.ServiceSet
	if !full && s.synced {
		if changed = model.ChangedServices(s.last, services); len(changed) == 0 {
			return "", nil, nil
		}
		if stale := s.fake.NewTransaction(); s.table.StaleChains(stale, now) > 0 {
			if err := s.fake.Run(ctx, stale); err != nil {
				return "", nil, fmt.Errorf("deleting stale chains: %w\n%s", err, stale)
			}
		}
	}
	u, err := s.table.Sync(s.fake.NewTransaction(), &nftables.Snapshot{Family: s.fam, Node: node, Services: services}, changed, now)
	if err != nil {
		return "", nil, err
	}
	if u.Tx.NumOperations() > 0 {
		if err := s.fake.Run(ctx, u.Tx); err != nil {
			return "", nil, fmt.Errorf("transaction refused: %w\n%s", err, u.Tx)
		}
	}
	u.Commit()
	s.last, s.synced = services, true
	return u.Tx.String(), u.Problems, nil
}

func runNFTSeed(t *testing.T, seed uint64, nSteps int) {
	r := rand.New(rand.NewPCG(seed, 0x6865726c64))
	e := randomNFTEnv(r)
	node := e.heraldNode()
	w := newWorld(r, 12)
	w.repairDuplicates()
	rerun := fmt.Sprintf("rerun: cd hack/kporacle && HERALD_ORACLE_SEEDS=%d, HERALD_ORACLE_STEPS=%d go test ./compare -run 'TestNFTOracleCompare/seed=%d$' -v\nenv: %s",
		seed, nSteps, seed, e)

	var sides []*nftSide
	for _, fam := range allFamilies {
		sides = append(sides, newNFTSide(t, e, fam))
	}
	for _, s := range sides {
		s.feed(diff(&world{}, w))
	}
	history := []string{"initial world: " + w.summary()}
	for step := 0; step <= nSteps; step++ {
		full := step == 0
		if step > 0 {
			next := w.clone()
			for range weighted(r, 5, 45, 30, 20) {
				history = append(history, fmt.Sprintf("step %d: %s", step, next.mutate(r)))
			}
			next.repairDuplicates()
			events := diff(w, next)
			w = next
			full = step == nSteps || chance(r, 10)
			for _, s := range sides {
				s.feed(events)
				if full {
					s.oracle.ForceFullSync()
				}
			}
			if full {
				history = append(history, fmt.Sprintf("step %d: forced full sync", step))
			}
		}
		services, problems := heraldServices(w)
		if len(problems) > 0 {
			t.Fatalf("%s\nstep %d: herald's converter reported problems for valid objects:\n  %s", rerun, step, strings.Join(problems, "\n  "))
		}
		now := time.Unix(int64(2*step), 0)
		for _, s := range sides {
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("%s\n%s step %d (full=%v):\n%s\nhistory:\n  %s", rerun, s.fam, step, full,
					fmt.Sprintf(format, args...), strings.Join(history, "\n  "))
			}
			kp, err := s.oracle.Sync()
			if err != nil {
				fail("kube-proxy: %v\n%s", err, kp.Transaction)
			}
			s.kubeProxyAsked(kp.Transaction)
			tx, probs, err := s.syncHerald(node, services, full, now)
			if err != nil {
				fail("herald: %v", err)
			}
			if len(probs) > 0 {
				fail("herald skipped input of valid objects: %v", probs)
			}
			want, err := s.oracle.Dump()
			if err != nil {
				fail("%v", err)
			}
			if d := nftDiff(s.withAskedTimeouts(want), nftoracle.TableName, s.fake.Dump(), nftables.TableName); d != "" {
				fail("tables differ (- kube-proxy, + herald):\n%s", d)
			}
			if missing := nftMissingElements(kp.Transaction, s.fake.Dump()); len(missing) > 0 {
				fail("elements kube-proxy added are not in herald's table as written:\n  %s", strings.Join(missing, "\n  "))
			}
			if !full && !kp.Full {
				if extra := nftWrittenChains(tx).Difference(nftWrittenChains(kp.Transaction)); len(extra) > 0 {
					fail("herald's partial sync rewrote chains kube-proxy's did not: %v\nherald:\n%s\nkube-proxy:\n%s",
						sets.List(extra), tx, kp.Transaction)
				}
			}
		}
	}
}

// nftDiff is "" when the two dumps agree after nftCanonical, else a unified diff.
func nftDiff(kproxy, kproxyTable, herald, heraldTable string) string {
	want, got := withoutElementComments(nftCanonical(kproxy, kproxyTable)), withoutElementComments(nftCanonical(herald, heraldTable))
	if want == got {
		return ""
	}
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(want), B: difflib.SplitLines(got), FromFile: "kube-proxy", ToFile: "herald", Context: 2,
	})
	return d
}

var (
	// kube-proxy's endpoint choice, DNAT form (writeServiceToEndpointDNATs).
	numgenDNAT = regexp.MustCompile(`^meta l4proto (\S+) dnat (ip6?) addr \. port to numgen random mod (\d+) map \{ (.*) \}$`)
	// and jump form, with session affinity (writeServiceToEndpointJumps).
	numgenVmap = regexp.MustCompile(`^numgen random mod (\d+) vmap \{ (.*) \}$`)
	jumpTarget = regexp.MustCompile(`\b(?:goto|jump) (\S+)`)
)

// nftCanonical normalizes a knftables Fake dump of table for the comparison
// (nftDeliberateDifferences): the table named TABLE without its comment, kube-proxy's
// numgen maps written as herald's cascade, unused empty service chains dropped, set
// and map elements sorted.
func nftCanonical(dump, table string) string {
	var lines []string
	for _, line := range strings.Split(strings.TrimSuffix(dump, "\n"), "\n") {
		parts := strings.SplitN(line, " ", 5)
		if len(parts) < 4 || parts[0] != "add" || parts[3] != table {
			lines = append(lines, line)
			continue
		}
		parts[3] = "TABLE"
		if parts[1] == "table" {
			lines = append(lines, strings.Join(parts[:4], " "))
			continue
		}
		if parts[1] == "rule" && len(parts) == 5 {
			chain, rule, _ := strings.Cut(parts[4], " ")
			prefix := strings.Join(parts[:4], " ") + " " + chain + " "
			if cascade, ok := numgenCascade(parts[2], rule); ok {
				for _, r := range cascade {
					lines = append(lines, prefix+r)
				}
				continue
			}
		}
		lines = append(lines, strings.Join(parts, " "))
	}

	// Service chains (their names hold a "/") with no rule that nothing jumps to.
	hasRules, used := map[string]bool{}, map[string]bool{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) > 4 && f[0] == "add" && f[1] == "rule" {
			hasRules[f[4]] = true
		}
		for _, m := range jumpTarget.FindAllStringSubmatch(line, -1) {
			used[m[1]] = true
		}
	}
	out := lines[:0]
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 5 && f[0] == "add" && f[1] == "chain" && strings.Contains(f[4], "/") && !hasRules[f[4]] && !used[f[4]] {
			continue
		}
		out = append(out, line)
	}
	return nftoracle.SortElements(strings.Join(out, "\n") + "\n")
}

// numgenCascade writes one of kube-proxy's numgen map rules as herald's cascade.
func numgenCascade(family, rule string) ([]string, bool) {
	var n int
	var choices []string // per endpoint, what the rule does with it
	if m := numgenDNAT.FindStringSubmatch(rule); m != nil {
		n, _ = strconv.Atoi(m[3])
		for i, el := range strings.Split(m[4], " , ") {
			idx, target, ok := strings.Cut(el, " : ")
			ip, port, ok2 := strings.Cut(target, " . ")
			addr, err := netip.ParseAddr(ip)
			p, err2 := strconv.ParseUint(port, 10, 16)
			if !ok || !ok2 || idx != strconv.Itoa(i) || err != nil || err2 != nil {
				return nil, false
			}
			choices = append(choices, "meta l4proto "+m[1]+" dnat to "+netip.AddrPortFrom(addr, uint16(p)).String())
		}
	} else if m := numgenVmap.FindStringSubmatch(rule); m != nil {
		n, _ = strconv.Atoi(m[1])
		for i, el := range strings.Split(m[2], " , ") {
			idx, verdict, ok := strings.Cut(el, " : ")
			if !ok || idx != strconv.Itoa(i) {
				return nil, false
			}
			choices = append(choices, verdict)
		}
	} else {
		return nil, false
	}
	if n != len(choices) {
		return nil, false
	}
	var out []string
	for i, c := range choices {
		if i < n-1 {
			c = fmt.Sprintf("numgen random mod %d 0 %s", n-i, c)
		}
		out = append(out, c)
	}
	return out, true
}

var elementComment = regexp.MustCompile(` comment "[^"]*"`)

// withoutElementComments drops the comments of a canonical dump's elements.
func withoutElementComments(dump string) string {
	lines := strings.Split(dump, "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, "add element ") {
			lines[i] = elementComment.ReplaceAllString(line, "")
		}
	}
	return strings.Join(lines, "\n")
}

// nftMissingElements lists the elements kube-proxy's transaction added, as it wrote
// them (comment included), that herald's table dump lacks.
func nftMissingElements(kproxyTx, heraldDump string) []string {
	have := map[string]bool{}
	for _, line := range strings.Split(nftCanonical(heraldDump, nftables.TableName), "\n") {
		have[line] = true
	}
	var missing []string
	for _, line := range strings.Split(nftCanonical(kproxyTx, nftoracle.TableName), "\n") {
		if strings.HasPrefix(line, "add element ") && !have[line] {
			missing = append(missing, line)
		}
	}
	return missing
}

// nftWrittenChains names the chains a transaction adds rules to.
func nftWrittenChains(tx string) sets.Set[string] {
	out := sets.New[string]()
	for _, line := range strings.Split(tx, "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[0] == "add" && f[1] == "rule" {
			out.Insert(f[4])
		}
	}
	return out
}
