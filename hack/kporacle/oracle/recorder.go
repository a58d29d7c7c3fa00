//go:build linux

package oracle

import (
	"strings"
	"sync"
	"time"

	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
)

// recordingIPTables is kube-proxy's own fake iptables (FakeIPTables) with the
// calls of one sync recorded. The fake keeps a simulated copy of the tables and
// applies restore payloads to it with iptables-restore --noflush semantics
// (rejecting jumps to missing chains); nothing reaches the kernel.
type recordingIPTables struct {
	*iptablestest.FakeIPTables

	// restores holds every RestoreAll call since the last takeCalls.
	restores []restoreCall
	// ensuredRules holds every EnsureRule call since the last takeCalls,
	// written as iptables arguments ("-t nat -I PREROUTING ...").
	ensuredRules []string

	monitorOnce sync.Once
	// monitorReady is closed once the proxier has registered reload.
	monitorReady chan struct{}
	// reload is the proxier's forced-full-sync function, handed to Monitor.
	reload func()
}

// restoreCall is one iptables-restore invocation.
type restoreCall struct {
	payload string
	err     error
}

func newRecordingIPTables(ipv6, hasRandomFully bool) *recordingIPTables {
	fake := iptablestest.NewFake()
	if ipv6 {
		fake = iptablestest.NewIPv6Fake()
	}
	fake.SetHasRandomFully(hasRandomFully)
	return &recordingIPTables{FakeIPTables: fake, monitorReady: make(chan struct{})}
}

// RestoreAll records the payload and applies it to the simulated tables.
func (r *recordingIPTables) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	err := r.FakeIPTables.RestoreAll(data, flush, counters)
	r.restores = append(r.restores, restoreCall{payload: string(data), err: err})
	return err
}

// EnsureRule records the rule and adds it to the simulated tables. kube-proxy
// calls it only on full syncs, for the jumps from the built-in chains. It
// passes a comment with spaces as one argument; the rule is recorded and
// stored with that argument quoted, as iptables-save prints it.
func (r *recordingIPTables) EnsureRule(position utiliptables.RulePosition, table utiliptables.Table, chain utiliptables.Chain, args ...string) (bool, error) {
	quoted := quoteArgs(args)
	rule := "-t " + string(table) + " " + string(position) + " " + string(chain) + " " + strings.Join(quoted, " ")
	r.ensuredRules = append(r.ensuredRules, rule)
	return r.FakeIPTables.EnsureRule(position, table, chain, quoted...)
}

// quoteArgs puts double quotes around arguments that contain a space.
func quoteArgs(args []string) []string {
	quoted := make([]string, len(args))
	for i, arg := range args {
		quoted[i] = arg
		if strings.Contains(arg, " ") {
			quoted[i] = `"` + arg + `"`
		}
	}
	return quoted
}

// Monitor captures the proxier's reload function instead of polling a canary
// chain. The real Monitor would also create KUBE-PROXY-CANARY chains; the fake
// (and so this oracle) does not.
func (r *recordingIPTables) Monitor(_ utiliptables.Chain, _ []utiliptables.Table, reloadFunc func(), _ time.Duration, _ <-chan struct{}) {
	r.monitorOnce.Do(func() {
		r.reload = reloadFunc
		close(r.monitorReady)
	})
}

// takeCalls returns and forgets the calls recorded since the previous takeCalls.
func (r *recordingIPTables) takeCalls() (restores []restoreCall, ensuredRules []string) {
	restores, ensuredRules = r.restores, r.ensuredRules
	r.restores, r.ensuredRules = nil, nil
	return restores, ensuredRules
}
