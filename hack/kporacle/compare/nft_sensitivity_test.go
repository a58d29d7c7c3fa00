//go:build linux

package compare

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestNFTComparisonDetectsChanges makes sure the nftables comparison hides nothing
// but nftDeliberateDifferences: in a table herald and kube-proxy agree on after a full
// sync, dropping any line, duplicating a rule or element, swapping two different rules
// of one chain or changing one word that holds a digit (addresses, ports, marks,
// probabilities, timeouts, hashed names, comments) must make the comparison of
// TestNFTOracleCompare (nftDiff, or nftMissingElements for element comments) fail.
func TestNFTComparisonDetectsChanges(t *testing.T) {
	checked := 0
	for seed := uint64(1); seed <= 10 && checked < 3000; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x6865726c64))
		e := randomNFTEnv(r)
		w := newWorld(r, 12)
		w.repairDuplicates()
		services, _ := heraldServices(w)
		for _, fam := range allFamilies {
			s := newNFTSide(t, e, fam)
			s.feed(diff(&world{}, w))
			kp, err := s.oracle.Sync()
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.syncHerald(e.heraldNode(), services, true, time.Unix(0, 0)); err != nil {
				t.Fatal(err)
			}
			want, err := s.oracle.Dump()
			if err != nil {
				t.Fatal(err)
			}
			herald := s.fake.Dump()
			differs := func(dump string) bool {
				return nftDiff(want, "kube-proxy", dump, "herald") != "" || len(nftMissingElements(kp.Transaction, dump)) > 0
			}
			if differs(herald) {
				t.Fatalf("seed %d %s: no agreement to start from:\n%s", seed, fam, nftDiff(want, "kube-proxy", herald, "herald"))
			}
			checked += checkNFTSensitivity(t, herald, differs)
		}
	}
	t.Logf("%d mutated tables checked", checked)
	if checked < 3000 {
		t.Errorf("only %d mutations checked; the worlds of seeds 1-10 got too small", checked)
	}
}

// checkNFTSensitivity mutates a herald table dump every way the test names and
// returns how many mutations it checked.
func checkNFTSensitivity(t *testing.T, dump string, differs func(string) bool) int {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(dump, "\n"), "\n")
	n := 0
	detect := func(what string, mutated []string) {
		t.Helper()
		n++
		if !differs(strings.Join(mutated, "\n") + "\n") {
			t.Errorf("not detected: %s", what)
		}
	}
	without := func(i int) []string { return append(append([]string{}, lines[:i]...), lines[i+1:]...) }
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) < 4 || f[1] == "table" {
			continue // the table's name and comment differ on purpose
		}
		detect("dropped "+line, without(i))
		if f[1] == "rule" || f[1] == "element" {
			detect("duplicated "+line, append(append(append([]string{}, lines[:i+1]...), line), lines[i+1:]...))
		}
		for j, word := range f {
			if j < 4 || !strings.ContainsAny(word, "0123456789") {
				continue
			}
			changed := append([]string{}, f...)
			changed[j] = word + "1"
			m := append([]string{}, lines...)
			m[i] = strings.Join(changed, " ")
			detect("changed word "+word+" in "+line, m)
		}
		if i+1 < len(lines) {
			g := strings.Fields(lines[i+1])
			if f[1] == "rule" && len(g) > 4 && g[1] == "rule" && g[4] == f[4] && lines[i+1] != line {
				m := append([]string{}, lines...)
				m[i], m[i+1] = m[i+1], m[i]
				detect("swapped "+line+" and "+lines[i+1], m)
			}
		}
	}
	return n
}
