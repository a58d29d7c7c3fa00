//go:build linux

package compare

// TestOracleCompare is the oracle test of herald's iptables proxier: it generates
// many Service/EndpointSlice combinations and requires herald's iptables-restore payload
// to equal kube-proxy v1.36.3's after normalization, for full syncs and for a sequence
// of changes, with every environment-dependent choice made the same way on both sides.
//
// Per seed: a random node configuration (env_test.go) and a random world of Services
// and EndpointSlices (world_test.go), fed to two kube-proxy proxiers (IPv4 and IPv6,
// package oracle) and to herald's generator for each family. Then `steps` rounds of 0-3
// random changes; the last round (and some others) forces a full sync. At every sync,
// for each family:
//
//  1. Payload: kube-proxy's restore input (filter and nat) equals herald's
//     iptables.Generate output for the same input, after oracle.Canonical on both. For
//     partial syncs herald gets Options.Changed = the Services kube-proxy considers
//     changed (kubeProxyView), and Options.ExistingNATChains = the chains in herald's
//     simulated nat table, which is where kube-proxy takes its stale chains from.
//     Full syncs also compare the jump rules kube-proxy ensures with iptables.JumpRules.
//  2. End state: herald's runner logic (heraldSim: ChangedServices on the dual-stack
//     Services, stale chains from the previous payload, no sync when nothing changed)
//     applied with iptables-restore --noflush semantics gives the same tables as
//     kube-proxy's (oracle.Dump), after oracle.Canonical; and the runner rewrites every
//     Service whose converted objects of the family changed.
//  3. herald reports no problems: the input is valid, so nothing may be skipped; and the
//     payload's own account (Filter/NAT.Chains and .Rules, DeletedNATChains,
//     ActiveNATChains, SkippedNATRules) matches kube-proxy's payload and end state.
//
// Seeds: 1..50 by default. HERALD_ORACLE_SEEDS=N runs seeds 1..N, "a-b" a range,
// "7," or "7,42,1000" a list; HERALD_ORACLE_STEPS sets the number of change rounds
// (default 6). A failure prints the command that reruns its seed, the history of the
// seed and, if a fresh full sync of the world differs too, a minimal world as YAML
// (shrink_test.go; HERALD_ORACLE_SHRINK=0 skips that); HERALD_ORACLE_VERBOSE=1 adds the
// objects changed in the failing step (all objects for the first sync). Related tests: TestOracleLargeCluster
// (large_test.go), TestComparisonDetectsChanges (sensitivity_test.go).
//
// Deliberate differences: see deliberateDifferences below; each is either normalized
// away (both sides identically) or avoided by configuration, never ignored silently.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"herald.dev/herald/hack/kporacle/oracle"
	"herald.dev/herald/proxy/iptables"
	"herald.dev/herald/proxy/model"
)

// deliberateDifferences lists every way the comparison departs from byte equality of
// the two payloads, and why.
var deliberateDifferences = []struct{ what, why string }{
	{
		"Service order: rules in nat KUBE-SERVICES and KUBE-NODEPORTS and in filter KUBE-SERVICES, " +
			"KUBE-EXTERNAL-SERVICES, KUBE-NODEPORTS and KUBE-PROXY-FIREWALL are compared after a stable " +
			"sort by the service port in their comment (oracle.Canonical on both sides)",
		"kube-proxy writes them while iterating a Go map, so its order changes from run to run; herald " +
			"sorts by namespace, name, port name and protocol, which is one of kube-proxy's possible orders. " +
			"The relative order of one service port's rules is kept and compared.",
	},
	{
		"Layout: chain declarations are sorted and each chain's rules are grouped after them; " +
			"\"-X\" lines are sorted (oracle.Canonical)",
		"kube-proxy declares endpoint chains in map order when it merges cluster and local endpoints " +
			"(topology hints, terminating fallback) and lists stale chains from a set. Rule order within " +
			"each chain is compared exactly; iptables-restore does not care how chains interleave.",
	},
	{
		"The final nat KUBE-SERVICES \"-d <node IP> -j KUBE-NODEPORTS\" rules (restricted " +
			"--nodeport-addresses) are compared sorted by text (oracle.Canonical)",
		"kube-proxy builds the address list from a set (GetNodeIPs); the rules are equivalent in any order.",
	},
	{
		"Partial syncs: herald gets kube-proxy's changed set (kubeProxyView), not the one its runner " +
			"computes (iptables.ChangedServices over both families' converted Services)",
		"kube-proxy tracks each family separately, compares whole EndpointSlice objects (ready unset -> " +
			"true marks a Service changed) and tells \"no source ranges\" from \"allow all\"; herald's " +
			"runner rewrites a Service when only its other family changed and skips slice changes no rule " +
			"depends on. Rewritten chains of an unchanged Service are identical, so the runner's payloads " +
			"are checked through the end state (oracle.Dump vs herald's simulated tables), and its set must " +
			"contain every Service whose converted objects of the family changed.",
	},
	{
		"Idle syncs: when nothing changed herald's runner restores nothing",
		"kube-proxy's partial sync still rewrites the top-level chains with identical content; the " +
			"payload comparison still runs herald's generator with an empty changed set, and the end " +
			"states are compared.",
	},
	{
		"Stale chains in herald's runner come from the previous payload's ActiveNATChains (partial " +
			"syncs), not from iptables-save",
		"same chains deleted (the end states are compared); the payload comparison gives herald the " +
			"listed chains, as kube-proxy lists them.",
	},
	{
		"The oracle's fake iptables stands in for the kernel on both sides: no KUBE-PROXY-CANARY " +
			"chains, built-in chains without policies, jump rules stored with quoted comments",
		"the end-state comparison applies herald's payloads and jump rules to the same fake " +
			"(iptablestest.FakeIPTables), so both dumps have the same format.",
	},
	{
		"A family without a node IP: herald's Node gets 127.0.0.1 or ::1 as that family's node IP " +
			"(env.heraldNode; HERALD_ORACLE_NO_LOOPBACK_NODEIP=1 turns this off)",
		"kube-proxy's server falls back to the loopback address (the oracle too), and a " +
			"loadBalancerSourceRange containing it then adds \"-s <LB IP> -j KUBE-EXT-\" rules to KUBE-FW; " +
			"herald's generator leaves the node IP unset instead. herald's runner only programs families " +
			"the node has an IP of, so this cannot happen there; the test passes what kube-proxy uses.",
	},
	{
		"No Service has more than 1000 endpoints in TestOracleCompare",
		"above that kube-proxy deletes stale chains at most once per --iptables-sync-period, a wall-clock " +
			"decision; TestOracleLargeCluster covers large-cluster mode with that period set to 1ns on the " +
			"oracle, so both sides delete stale chains on every sync.",
	},
	{
		"TestOracleLargeCluster: no end-state comparison for the partial sync that crosses the " +
			"1000-endpoint threshold",
		"kube-proxy rewrites only the changed Services then, so unchanged ones keep endpoint rules of the " +
			"old form (with or without comments) until they change; herald's runner makes that sync full. The " +
			"payload is still compared (herald given kube-proxy's changed set), and the end states again " +
			"from the next sync on.",
	},
}

// TestDeliberateDifferences prints the list (go test -run DeliberateDifferences -v).
func TestDeliberateDifferences(t *testing.T) {
	for i, d := range deliberateDifferences {
		if d.what == "" || d.why == "" {
			t.Errorf("deliberate difference %d lacks its description or its reason", i)
		}
		t.Logf("%d. %s\n   why: %s", i+1, d.what, d.why)
	}
}

func TestMain(m *testing.M) {
	// kube-proxy logs through the global klog in places (e.g. "Service has no
	// healthcheck nodeport"); keep test output readable.
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// seeds returns the seeds to run. HERALD_ORACLE_SEEDS is a count N (seeds 1..N) or a
// comma-separated list of seeds and ranges ("7,", "7,42", "100-199,7"); default 50.
func seeds(t *testing.T) []uint64 {
	spec := os.Getenv("HERALD_ORACLE_SEEDS")
	if spec == "" {
		spec = "50"
	}
	parse := func(s string) uint64 {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			t.Fatalf("HERALD_ORACLE_SEEDS=%q: %v", spec, err)
		}
		return n
	}
	if !strings.ContainsAny(spec, ",-") {
		var out []uint64
		for s := uint64(1); s <= parse(spec); s++ {
			out = append(out, s)
		}
		return out
	}
	var out []uint64
	for _, part := range strings.Split(spec, ",") {
		if lo, hi, ok := strings.Cut(part, "-"); ok {
			for s := parse(lo); s <= parse(hi); s++ {
				out = append(out, s)
			}
			continue
		}
		if strings.TrimSpace(part) != "" {
			out = append(out, parse(part))
		}
	}
	return out
}

func steps(t *testing.T) int {
	if s := os.Getenv("HERALD_ORACLE_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("HERALD_ORACLE_STEPS: bad value %q", s)
		}
		return n
	}
	return 6
}

var allFamilies = []model.Family{model.IPv4, model.IPv6}

func TestOracleCompare(t *testing.T) {
	n := steps(t)
	list := seeds(t)
	coverage.reset()
	for _, seed := range list {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runSeed(t, seed, n)
		})
	}
	// The generator must keep producing what the comparison is meant to cover; with
	// the default seeds every feature below shows up in kube-proxy's output.
	if len(list) >= 50 && !t.Failed() {
		coverage.check(t)
	}
}

// side is one family's pair: kube-proxy's proxier and herald's simulated runner, plus
// kube-proxy's view of the last synced world (for its changed set).
type side struct {
	fam      model.Family
	oracle   *oracle.Oracle
	herald   *heraldSim
	lastView []model.Service
	// lastSemantic is the same without kube-proxy's whole-object slice comparison.
	lastSemantic []model.Service
}

func newSide(t *testing.T, e env, fam model.Family) *side {
	return newSideWith(t, e, e.oracleOptions(fam))
}

func newSideWith(t *testing.T, e env, opts oracle.Options) *side {
	fam := model.IPv4
	if opts.IPv6 {
		fam = model.IPv6
	}
	o, err := oracle.New(opts)
	if err != nil {
		t.Fatalf("oracle.New(%s): %v", fam, err)
	}
	if labels := e.topologyLabels(); labels != nil {
		o.OnTopologyChange(labels)
	}
	return &side{fam: fam, oracle: o, herald: newHeraldSim(fam)}
}

// feed hands the informer notifications to kube-proxy.
func (s *side) feed(events []event) {
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

func runSeed(t *testing.T, seed uint64, nSteps int) {
	r := rand.New(rand.NewPCG(seed, 0x6865726c64))
	shuffle := rand.New(rand.NewPCG(seed, 2))
	e := randomEnv(r)
	node := e.heraldNode()
	w := newWorld(r, 12)
	w.repairDuplicates()
	rerun := fmt.Sprintf("rerun: cd hack/kporacle && HERALD_ORACLE_SEEDS=%d, HERALD_ORACLE_STEPS=%d go test ./compare -run 'TestOracleCompare/seed=%d$' -v\nenv: %s",
		seed, nSteps, seed, e)

	sides := make([]*side, 0, len(allFamilies))
	for _, fam := range allFamilies {
		sides = append(sides, newSide(t, e, fam))
	}
	initial := diff(&world{}, w)
	for _, s := range sides {
		s.feed(initial)
	}

	var log []string // what happened so far, for failure messages
	log = append(log, "initial world: "+w.summary())
	for step := 0; step <= nSteps; step++ {
		full := step == 0
		var events []event
		if step > 0 {
			next := w.clone()
			for range weighted(r, 5, 45, 30, 20) {
				what := next.mutate(r)
				coverage.recordChange(what)
				log = append(log, fmt.Sprintf("step %d: %s", step, what))
			}
			next.repairDuplicates()
			events = diff(w, next)
			w = next
			full = step == nSteps || chance(r, 10)
			for _, s := range sides {
				s.feed(events)
				if full {
					s.oracle.ForceFullSync()
				}
			}
			if full {
				log = append(log, fmt.Sprintf("step %d: forced full sync", step))
			}
		}
		coverage.recordWorld(w)
		services, problems := heraldServices(w)
		if len(problems) > 0 {
			t.Errorf("%s\nstep %d: herald's converter reported problems for valid objects:\n  %s", rerun, step, strings.Join(problems, "\n  "))
			return
		}
		for _, s := range sides {
			c := &stepCheck{t: t, s: s, step: step, full: full, node: node, w: w, services: services,
				shuffled: shuffled(shuffle, services), events: events, rerun: rerun, log: log, endState: true, env: &e}
			if !c.run() {
				return
			}
		}
	}
}

// stepCheck compares one sync of one family.
type stepCheck struct {
	t        *testing.T
	s        *side
	step     int
	full     bool
	node     iptables.Node
	w        *world
	services []model.Service // sorted, as herald's tracker hands them over
	shuffled []model.Service // the same in random order
	events   []event
	rerun    string
	log      []string
	// endState enables the end-state comparison (check 2).
	endState bool
	// res is kube-proxy's sync, once run has been called.
	res oracle.Result
	// env, if set, lets a failure look for a minimal reproduction.
	env *env
}

func (c *stepCheck) failf(format string, args ...any) bool {
	c.t.Helper()
	c.t.Errorf("%s\n%s step %d (%s sync):\n%s\nhistory:\n  %s", c.rerun, c.s.fam, c.step, c.kind(),
		fmt.Sprintf(format, args...), strings.Join(c.log, "\n  "))
	if os.Getenv("HERALD_ORACLE_VERBOSE") != "" {
		if c.events == nil {
			c.t.Logf("all objects:\n%s", worldYAML(c.w))
		} else {
			c.t.Logf("changed objects of this step:\n%s", eventsYAML(c.events))
		}
	}
	return false
}

// reproduce looks for a minimal full-sync reproduction of a difference: if a fresh
// full sync of this step's world differs too, it shrinks the world and logs it as YAML
// (kporacle's CLI reads it: go run ./cmd/kporacle -node-name node-a ... file.yaml).
// HERALD_ORACLE_SHRINK=0 turns this off.
func (c *stepCheck) reproduce() {
	c.t.Helper()
	if os.Getenv("HERALD_ORACLE_SHRINK") == "0" || c.env == nil {
		return
	}
	if fullSyncDiff(c.t, *c.env, c.s.fam, c.w) == "" {
		c.t.Logf("a fresh full sync of this world agrees: the difference is specific to the sequence of syncs")
		return
	}
	small := shrink(c.t, *c.env, c.s.fam, c.w)
	c.t.Logf("minimal world whose full %s sync differs (%s):\n%s\ndifference:\n%s",
		c.s.fam, small.summary(), worldYAML(small), fullSyncDiff(c.t, *c.env, c.s.fam, small))
}

func (c *stepCheck) kind() string {
	if c.full {
		return "full"
	}
	return "partial"
}

// run does the checks of one sync; false means it failed and the seed stops.
func (c *stepCheck) run() bool {
	c.t.Helper()
	s := c.s
	res, err := s.oracle.Sync()
	c.res = res
	if err != nil {
		return c.failf("kube-proxy's sync failed: %v", err)
	}
	if res.Full != c.full {
		return c.failf("kube-proxy did a full=%v sync, the test expected full=%v", res.Full, c.full)
	}

	// 1. The payload, with kube-proxy's changed set.
	view := kubeProxyView(c.w, s.fam, true)
	var changed model.ServiceSet
	if !c.full {
		changed = changedNames(s.lastView, view)
	}
	s.lastView = view
	semanticView := kubeProxyView(c.w, s.fam, false)
	payload, err := iptables.Generate(&iptables.Snapshot{Family: s.fam, Node: c.node, Services: c.shuffled},
		iptables.Options{Changed: changed, ExistingNATChains: natChains(s.herald.ipt)})
	if err != nil {
		return c.failf("herald's Generate: %v", err)
	}
	if len(payload.Problems) > 0 {
		return c.failf("herald skipped input kube-proxy programs: %v", payload.Problems)
	}
	for _, table := range []struct {
		name           string
		herald, kproxy string
	}{
		{"filter", string(payload.Filter.Text), res.Filter},
		{"nat", string(payload.NAT.Text), res.NAT},
	} {
		if d := canonicalDiff(table.kproxy, table.herald); d != "" {
			c.reproduce()
			return c.failf("%s payload differs (changed set %v):\n%s", table.name, names(changed), d)
		}
	}
	if c.full {
		if want, got := res.EnsuredRules, jumpRuleStrings(); !slices.Equal(want, got) {
			return c.failf("jump rules differ:\n%s", textDiff("kube-proxy", "herald", strings.Join(want, "\n")+"\n", strings.Join(got, "\n")+"\n"))
		}
	}

	coverage.recordPayload(res.Filter, res.NAT, res.Full)

	// 1b. What the payload says about itself, which herald's runner and metrics use.
	kpState, err := s.oracle.Dump()
	if err != nil {
		return c.failf("oracle dump: %v", err)
	}
	if msg := checkMetadata(payload, res, kpState); msg != "" {
		return c.failf("payload metadata: %s", msg)
	}

	// 2. The end state, with herald's runner logic.
	runnerChanged, _, err := s.herald.sync(&iptables.Snapshot{Family: s.fam, Node: c.node, Services: c.services}, c.full)
	if err != nil {
		return c.failf("herald's runner: %v", err)
	}
	if !c.endState {
		s.lastSemantic = semanticView
		return true
	}
	if !c.full {
		semantic := changedNames(s.lastSemantic, semanticView)
		for name := range semantic {
			if !runnerChanged.Has(name) {
				return c.failf("herald's runner does not rewrite %s, whose converted %s objects changed (runner: %v)", name, s.fam, names(runnerChanged))
			}
		}
	}
	s.lastSemantic = semanticView
	if d := canonicalDiff(kpState, dump(s.herald.ipt)); d != "" {
		c.reproduce()
		return c.failf("end state differs (kube-proxy changed %v, herald's runner changed %v):\n%s", names(changed), names(runnerChanged), d)
	}
	return true
}

func names(set model.ServiceSet) []string {
	if set == nil {
		return nil
	}
	out := []string{}
	for n := range set {
		out = append(out, n.String())
	}
	slices.Sort(out)
	return out
}

// canonicalDiff normalizes both texts with oracle.Canonical and returns a unified diff
// (kube-proxy = "-", herald = "+"), or "" if they are equal.
func canonicalDiff(kproxy, herald string) string {
	a, err := oracle.Canonical(kproxy)
	if err != nil {
		return "cannot parse kube-proxy's rules: " + err.Error()
	}
	b, err := oracle.Canonical(herald)
	if err != nil {
		return "cannot parse herald's rules: " + err.Error() + "\n" + herald
	}
	if a == b {
		return ""
	}
	return textDiff("kube-proxy", "herald", a, b)
}

func textDiff(nameA, nameB, a, b string) string {
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: nameA, ToFile: nameB, Context: 3,
	})
	if err != nil {
		return err.Error()
	}
	return d
}

// eventsYAML prints a step's changed objects (new versions; deletions by name).
func eventsYAML(events []event) string {
	var b strings.Builder
	for _, ev := range events {
		var obj any
		switch {
		case ev.newSvc != nil:
			obj = ev.newSvc
		case ev.oldSvc != nil:
			fmt.Fprintf(&b, "# deleted Service %s/%s\n", ev.oldSvc.Namespace, ev.oldSvc.Name)
			continue
		case ev.newSlice != nil:
			obj = ev.newSlice
		default:
			fmt.Fprintf(&b, "# deleted EndpointSlice %s/%s\n", ev.oldSlice.Namespace, ev.oldSlice.Name)
			continue
		}
		y, err := yaml.Marshal(obj)
		if err != nil {
			y = []byte(err.Error())
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String()
}
