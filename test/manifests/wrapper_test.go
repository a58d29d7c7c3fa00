package manifests

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/internal/lab/labtest"
)

// TestIPTablesWrapper runs the speaker image's hack/image/iptables-wrapper, installed
// under iptables' names as the Dockerfile does, in fresh network namespaces whose
// tables look like nodes of either backend, and checks the backend it runs.
func TestIPTablesWrapper(t *testing.T) {
	labtest.Require(t, "iptables-nft", "iptables-legacy", "iptables-nft-save", "iptables-legacy-save", "ip6tables-nft-save", "ip6tables-legacy-save")
	sbin, err := exec.LookPath("iptables-nft")
	if err != nil {
		t.Fatal(err)
	}
	sbin = filepath.Dir(sbin)

	// The wrapper under the names the image gives it.
	bin := t.TempDir()
	for _, n := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		if err := os.Symlink(repoPath("hack/image/iptables-wrapper"), filepath.Join(bin, n)); err != nil {
			t.Fatal(err)
		}
	}

	l := labtest.NewNet(t, "hmw-", netip.MustParsePrefix("172.31.2.0/24"))

	for i, tc := range []struct {
		name  string
		setup [][]string // commands run in the node's namespace first
		env   []string
		call  string // the name the wrapper is called by
		want  string // what its --version says
		mode  string // what it remembers ("" for nothing)
	}{
		{name: "empty node: nft", call: "iptables", want: "(nf_tables)", mode: "nft"},
		{name: "kubelet hint in nft", setup: [][]string{{"iptables-legacy", "-A", "INPUT", "-j", "ACCEPT"}, {"iptables-nft", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT"}},
			call: "iptables-restore", want: "(nf_tables)", mode: "nft"},
		{name: "kubelet hint in legacy", setup: [][]string{{"iptables-legacy", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT"}},
			call: "iptables-save", want: "(legacy)", mode: "legacy"},
		{name: "kubelet canary in legacy, ip6tables", setup: [][]string{{"ip6tables-legacy", "-t", "mangle", "-N", "KUBE-KUBELET-CANARY"}},
			call: "ip6tables", want: "(legacy)", mode: "legacy"},
		{name: "no hint, more legacy rules", setup: [][]string{{"iptables-legacy", "-A", "FORWARD", "-j", "ACCEPT"}},
			call: "iptables", want: "(legacy)", mode: "legacy"},
		{name: "no hint, more nft rules", setup: [][]string{{"iptables-nft", "-A", "FORWARD", "-j", "ACCEPT"}, {"iptables-nft", "-A", "INPUT", "-j", "ACCEPT"}, {"iptables-legacy", "-A", "INPUT", "-j", "ACCEPT"}},
			call: "ip6tables-save", want: "(nf_tables)", mode: "nft"},
		{name: "forced", setup: [][]string{{"iptables-legacy", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT"}}, env: []string{"HERALD_IPTABLES_MODE=nft"},
			call: "iptables", want: "(nf_tables)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := l.AddHost(fmt.Sprintf("n%d", i), netip.AddrFrom4([4]byte{172, 31, 2, byte(10 + i)}))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, cmd := range tc.setup {
				if _, err := h.Exec(ctx, cmd...); err != nil {
					t.Fatal(err)
				}
			}
			modeFile := filepath.Join(t.TempDir(), "run", "iptables-mode")
			env := append([]string{"env", "HERALD_IPTABLES_MODE_FILE=" + modeFile, "HERALD_IPTABLES_SBIN=" + sbin}, tc.env...)
			out, err := h.Exec(ctx, append(env, filepath.Join(bin, tc.call), "--version")...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("%s --version says %q, want %s", tc.call, strings.TrimSpace(string(out)), tc.want)
			}
			got, _ := os.ReadFile(modeFile)
			if strings.TrimSpace(string(got)) != tc.mode {
				t.Errorf("remembered mode %q, want %q", strings.TrimSpace(string(got)), tc.mode)
			}
			if tc.mode == "" {
				return
			}
			// Remembered: the next call runs the same backend without looking again,
			// whatever the tables hold by then.
			other := map[string]string{"nft": "legacy", "legacy": "nft"}[tc.mode]
			if err := os.WriteFile(modeFile, []byte(other+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err = h.Exec(ctx, "env", "HERALD_IPTABLES_MODE_FILE="+modeFile, "HERALD_IPTABLES_SBIN="+sbin, filepath.Join(bin, "iptables"), "--version")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"nft": "(nf_tables)", "legacy": "(legacy)"}[other]; !strings.Contains(string(out), want) {
				t.Errorf("with %q remembered, iptables --version says %q", other, strings.TrimSpace(string(out)))
			}
		})
	}
}
