//go:build linux

package oracle

import "testing"

func TestCanonicalIgnoresServiceOrder(t *testing.T) {
	svcA := []string{
		`-A KUBE-SERVICES -m comment --comment "ns/a:p cluster IP" -d 172.30.0.1 -j KUBE-SVC-A`,
		`-A KUBE-SERVICES -m comment --comment "ns/a:p loadbalancer IP" -d 1.2.3.4 -j KUBE-EXT-A`,
	}
	svcB := []string{`-A KUBE-SERVICES -m comment --comment "ns/b:p cluster IP" -d 172.30.0.2 -j KUBE-SVC-B`}
	last := []string{
		`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -d 192.168.0.3 -j KUBE-NODEPORTS`,
		`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -d 192.168.0.2 -j KUBE-NODEPORTS`,
	}
	head := []string{`*nat`, `:KUBE-SERVICES - [0:0]`, `:KUBE-SVC-B - [0:0]`, `:KUBE-SVC-A - [0:0]`, `:KUBE-EXT-A - [0:0]`, `:KUBE-NODEPORTS - [0:0]`}
	tail := []string{
		`-A KUBE-SVC-B -j KUBE-MARK-MASQ`,
		`-A KUBE-SVC-B -j KUBE-SEP-B`,
		`-X KUBE-SVC-OLD`,
		`COMMIT`,
	}
	abOrder := join(head, []string{`:KUBE-SVC-OLD - [0:0]`}, svcA, svcB, last, tail)
	baOrder := join(head, []string{`:KUBE-SVC-OLD - [0:0]`}, svcB, svcA, last[1:], last[:1], tail)

	want := lines(
		`*nat`,
		`:KUBE-NODEPORTS - [0:0]`,
		`:KUBE-SERVICES - [0:0]`,
		`:KUBE-EXT-A - [0:0]`,
		`:KUBE-SVC-A - [0:0]`,
		`:KUBE-SVC-B - [0:0]`,
		`:KUBE-SVC-OLD - [0:0]`,
		svcA[0], svcA[1], svcB[0], last[1], last[0],
		`-A KUBE-SVC-B -j KUBE-MARK-MASQ`,
		`-A KUBE-SVC-B -j KUBE-SEP-B`,
		`-X KUBE-SVC-OLD`,
		`COMMIT`,
	)
	assertText(t, "canonical a,b", canonical(t, abOrder), want)
	assertText(t, "canonical b,a", canonical(t, baOrder), want)
}

func TestCanonicalRejectsGarbage(t *testing.T) {
	if _, err := Canonical("-A KUBE-SERVICES -j X\n"); err == nil {
		t.Fatal("Canonical accepted rules outside a table")
	}
}
