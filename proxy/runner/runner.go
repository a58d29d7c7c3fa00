package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	goiptables "github.com/coreos/go-iptables/iptables"
	"herald.dev/herald/proxy/model"
)

// Do runs fn with the calling OS thread in the node's network namespace.
type Do func(fn func() error) error

// direct is the Do of a process already in the node's namespace.
func direct(fn func() error) error { return fn() }

// waitSeconds is how long iptables commands wait for the xtables lock, as kube-proxy's
// `iptables-restore -w 5`: long enough to outlast another agent's restore, short enough
// that a stuck lock shows up as a failed sync rather than a hung loop.
const waitSeconds = 5

// Backend picks the iptables binaries. Rules written through one backend are invisible
// to the other, so it must be the one the node's other agents (kubelet, CNI) use.
type Backend string

const (
	// BackendDefault runs iptables, iptables-restore and iptables-save as installed
	// (on Debian, the alternatives system decides which backend they are).
	BackendDefault Backend = ""
	// BackendLegacy runs iptables-legacy*, the x_tables kernel interface.
	BackendLegacy Backend = "legacy"
	// BackendNFT runs iptables-nft*, iptables rules stored as nftables.
	BackendNFT Backend = "nft"
)

// Runner applies restore payloads and single rules for one IP family.
type Runner struct {
	family  model.Family
	do      Do
	ipt     *goiptables.IPTables
	restore string // iptables-restore or ip6tables-restore
	save    string // iptables-save or ip6tables-save
}

// Commands are one family's iptables binaries: the command itself (run through
// go-iptables), its -restore and its -save.
type Commands struct {
	IPTables, Restore, Save string
}

// All lists the three names.
func (c Commands) All() []string { return []string{c.IPTables, c.Restore, c.Save} }

// CommandsFor names the binaries of a family and backend, as Debian's iptables
// package installs them: iptables, iptables-restore, iptables-save for IPv4,
// ip6tables… for IPv6, with -legacy or -nft after the base name for those backends.
func CommandsFor(family model.Family, backend Backend) (Commands, error) {
	base := "iptables"
	switch family {
	case model.IPv4:
	case model.IPv6:
		base = "ip6tables"
	default:
		return Commands{}, fmt.Errorf("%s: unknown family", family)
	}
	switch backend {
	case BackendDefault:
	case BackendLegacy, BackendNFT:
		base += "-" + string(backend)
	default:
		return Commands{}, fmt.Errorf("unknown iptables backend %q", backend)
	}
	return Commands{IPTables: base, Restore: base + "-restore", Save: base + "-save"}, nil
}

// New finds the family's binaries of the backend. do may be nil (the process's own
// namespace).
func New(family model.Family, do Do, backend Backend) (*Runner, error) {
	if do == nil {
		do = direct
	}
	cmds, err := CommandsFor(family, backend)
	if err != nil {
		return nil, fmt.Errorf("runner for %s: %w", family, err)
	}
	proto := goiptables.ProtocolIPv4
	if family == model.IPv6 {
		proto = goiptables.ProtocolIPv6
	}
	base := cmds.IPTables
	r := &Runner{family: family, do: do, restore: cmds.Restore, save: cmds.Save}
	for _, bin := range []*string{&r.restore, &r.save} {
		path, err := exec.LookPath(*bin)
		if err != nil {
			return nil, fmt.Errorf("runner for %s: %w", family, err)
		}
		*bin = path
	}
	// go-iptables runs `iptables --version` here; inside the namespace like the rest.
	err = do(func() error {
		var err error
		r.ipt, err = goiptables.New(goiptables.IPFamily(proto), goiptables.Path(base), goiptables.Timeout(waitSeconds))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("runner for %s: %s: %w", family, base, err)
	}
	return r, nil
}

// Family is the IP family the runner programs.
func (r *Runner) Family() model.Family { return r.family }

// HasRandomFully says whether MASQUERADE --random-fully is supported (iptables >= 1.6.2),
// which changes the rule kube-proxy writes in KUBE-POSTROUTING.
func (r *Runner) HasRandomFully() bool { return r.ipt.HasRandomFully() }

// Restore applies a payload with one `iptables-restore -w 5 --noflush --counters`, as
// kube-proxy does: --noflush leaves every chain the payload does not name alone, and
// --counters keeps the [packets:bytes] the payload states (zero for rewritten chains).
func (r *Runner) Restore(ctx context.Context, data []byte) error {
	_, err := r.run(ctx, data, r.restore, "-w", strconv.Itoa(waitSeconds), "--noflush", "--counters")
	if err != nil {
		return fmt.Errorf("%s: %w%s", r.restore, err, failedLine(err, data))
	}
	return nil
}

// Save returns `iptables-save -t table`.
func (r *Runner) Save(ctx context.Context, table string) ([]byte, error) {
	out, err := r.run(ctx, nil, r.save, "-t", table)
	if err != nil {
		return nil, fmt.Errorf("%s -t %s: %w", r.save, table, err)
	}
	return out, nil
}

// Chains lists the chains of one table, from `iptables-save -t table`.
func (r *Runner) Chains(ctx context.Context, table string) ([]string, error) {
	out, err := r.Save(ctx, table)
	if err != nil {
		return nil, err
	}
	return ParseChains(out, table), nil
}

// ChainExists reports whether table holds chain.
func (r *Runner) ChainExists(table, chain string) (bool, error) {
	var ok bool
	err := r.do(func() error {
		var err error
		ok, err = r.ipt.ChainExists(table, chain)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("looking for %s chain %s/%s: %w", r.family, table, chain, err)
	}
	return ok, nil
}

// EnsureChain creates chain unless it exists. Unlike go-iptables' ClearChain it never
// flushes: the chain may be carrying traffic until the next restore refills it. It asks
// first, since on every full sync but the first the chain is there.
func (r *Runner) EnsureChain(table, chain string) error {
	if ok, err := r.ChainExists(table, chain); err == nil && ok {
		return nil
	}
	if err := r.do(func() error { return r.ipt.NewChain(table, chain) }); err != nil {
		return fmt.Errorf("creating %s chain %s/%s: %w", r.family, table, chain, err)
	}
	return nil
}

// EnsureRule puts the rule at the top of table/chain unless it is already somewhere in
// it (kube-proxy's EnsureRule(Prepend, ...)).
func (r *Runner) EnsureRule(table, chain string, args ...string) error {
	err := r.do(func() error { return r.ipt.InsertUnique(table, chain, 1, args...) })
	if err != nil {
		return fmt.Errorf("ensuring %s rule in %s/%s %q: %w", r.family, table, chain, strings.Join(args, " "), err)
	}
	return nil
}

// run executes a command inside the namespace and returns its stdout; the error carries
// stderr, which is where iptables says what went wrong.
func (r *Runner) run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	return run(ctx, r.do, stdin, name, args...)
}

func run(ctx context.Context, do Do, stdin []byte, name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	err := do(func() error {
		cmd := exec.CommandContext(ctx, name, args...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd.Run()
	})
	if err != nil {
		return stdout.Bytes(), &CommandError{Err: err, Stderr: trimUsage(stderr.String())}
	}
	return stdout.Bytes(), nil
}

// trimUsage drops the "Try `iptables-restore -h' ..." hint and joins the lines, so
// that an error stays one log line.
func trimUsage(stderr string) string {
	var keep []string
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "Try `") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "; ")
}

// CommandError is a command that failed, with what it printed on stderr.
type CommandError struct {
	Err    error
	Stderr string
}

func (e *CommandError) Error() string {
	if e.Stderr == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + e.Stderr
}

func (e *CommandError) Unwrap() error { return e.Err }

// failedLine quotes the payload line iptables-restore names ("line N failed" from
// iptables-legacy, "Error occurred at line: N" from iptables-nft), so the log shows the
// rule rather than a number into a payload nobody kept.
func failedLine(err error, data []byte) string {
	var ce *CommandError
	if !errors.As(err, &ce) {
		return ""
	}
	m := lineRE.FindStringSubmatch(ce.Stderr)
	if m == nil {
		return ""
	}
	n, _ := strconv.Atoi(m[1])
	for line := 1; len(data) > 0; line++ {
		text := data
		if j := bytes.IndexByte(data, '\n'); j >= 0 {
			text, data = data[:j], data[j+1:]
		} else {
			data = nil
		}
		if line == n && string(text) != "COMMIT" { // iptables-nft names the COMMIT: no news
			return fmt.Sprintf(" (line %d: %s)", n, text)
		}
	}
	return ""
}

var lineRE = regexp.MustCompile(`line:? (\d+)`)
