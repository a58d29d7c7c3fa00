//go:build linux

package compare

import (
	"math/rand/v2"
	"strings"
	"testing"

	"herald.dev/herald/hack/kporacle/oracle"
	"herald.dev/herald/proxy/iptables"
)

// TestComparisonDetectsChanges makes sure the normalization hides nothing but service
// order: in a payload herald and kube-proxy agree on, dropping any rule, adding one,
// swapping two rules of one chain (except rules of different service ports in the
// chains filled in map order, deliberateDifferences[0]) or changing one word must make
// canonicalDiff report a difference.
func TestComparisonDetectsChanges(t *testing.T) {
	mutations = 0
	defer func() {
		t.Logf("%d mutated payloads checked", mutations)
		if mutations < 2000 {
			t.Errorf("only %d mutations checked; the worlds of seeds 1-10 got too small", mutations)
		}
	}()
	for seed := uint64(1); seed <= 10 && mutations < 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x6865726c64))
		e := randomEnv(r)
		w := newWorld(r, 12)
		w.repairDuplicates()
		for _, fam := range allFamilies {
			s := newSide(t, e, fam)
			s.feed(diff(&world{}, w))
			res, err := s.oracle.Sync()
			if err != nil {
				t.Fatal(err)
			}
			services, _ := heraldServices(w)
			payload, err := iptables.Generate(&iptables.Snapshot{Family: fam, Node: e.heraldNode(), Services: services}, iptables.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, table := range []struct{ kproxy, herald string }{
				{res.Filter, string(payload.Filter.Text)},
				{res.NAT, string(payload.NAT.Text)},
			} {
				if d := canonicalDiff(table.kproxy, table.herald); d != "" {
					t.Fatalf("seed %d %s: no agreement to start from:\n%s", seed, fam, d)
				}
				checkSensitivity(t, table.kproxy, table.herald)
			}
		}
	}
}

// mutations counts the mutated payloads checked.
var mutations int

func checkSensitivity(t *testing.T, kproxy, herald string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(herald, "\n"), "\n")
	want, err := oracle.Canonical(kproxy)
	if err != nil {
		t.Fatal(err)
	}
	// As canonicalDiff, with kube-proxy's side normalized once.
	detect := func(what string, mutated []string) {
		t.Helper()
		mutations++
		got, err := oracle.Canonical(strings.Join(mutated, "\n") + "\n")
		if err == nil && got == want {
			t.Errorf("not detected: %s", what)
		}
	}
	table := strings.TrimPrefix(lines[0], "*")
	var rules []int
	for i, l := range lines {
		if strings.HasPrefix(l, "-A ") {
			rules = append(rules, i)
		}
	}
	for _, i := range rules {
		detect("dropped "+lines[i], append(append([]string{}, lines[:i]...), lines[i+1:]...))

		dup := append(append(append([]string{}, lines[:i+1]...), lines[i]), lines[i+1:]...)
		detect("duplicated "+lines[i], dup)

		words := strings.Fields(lines[i])
		for j, word := range words {
			if j < 2 || !strings.ContainsAny(word, "0123456789") {
				continue
			}
			changed := append([]string{}, words...)
			changed[j] = word + "1"
			m := append([]string{}, lines...)
			m[i] = strings.Join(changed, " ")
			detect("changed word "+word+" in "+lines[i], m)
		}
	}
	for k := 0; k+1 < len(rules); k++ {
		i, j := rules[k], rules[k+1]
		a, b := lines[i], lines[j]
		chainA, chainB := strings.Fields(a)[1], strings.Fields(b)[1]
		if a == b || chainA != chainB {
			continue
		}
		if perServiceChain(table, chainA) && servicePortOf(a) != servicePortOf(b) {
			continue // map order in kube-proxy: normalized on purpose
		}
		if strings.Contains(a, "must be the last rule") && strings.Contains(b, "must be the last rule") {
			continue // "-d <node IP>" jumps in set order: normalized on purpose
		}
		m := append([]string{}, lines...)
		m[i], m[j] = b, a
		detect("swapped "+a+" and "+b, m)
	}
}

// perServiceChain mirrors oracle.Canonical's list of chains sorted by service port.
func perServiceChain(table, chain string) bool {
	switch table {
	case "nat":
		return chain == "KUBE-SERVICES" || chain == "KUBE-NODEPORTS"
	case "filter":
		return chain == "KUBE-SERVICES" || chain == "KUBE-EXTERNAL-SERVICES" || chain == "KUBE-NODEPORTS" || chain == "KUBE-PROXY-FIREWALL"
	}
	return false
}

// servicePortOf is the comment's first word ("ns/svc:port"), as oracle.Canonical sorts by.
func servicePortOf(rule string) string {
	_, c, ok := strings.Cut(rule, "--comment ")
	if !ok {
		return ""
	}
	c = strings.TrimPrefix(c, `"`)
	word, _, _ := strings.Cut(c, " ")
	return strings.TrimSuffix(word, `"`)
}
