// Package runner runs the host side of the proxier: the iptables binaries
// (iptables-restore, iptables-save and, through coreos/go-iptables, iptables itself),
// conntrack, nft (only to list tables: kube-proxy's nftables mode shows itself by
// them), and the few host facts the rules depend on (a sysctl, interface addresses,
// whether the kernel has IPv6).
//
// Every command and every file or socket a Runner opens goes through one function,
// Do, which runs its argument in the node's network namespace. The speaker runs in
// the node's namespace already (hostNetwork) and passes nil; tests pass a netlab
// Host's Do, so the real binaries program a namespace of the test's own and never the
// machine's. This works for commands because a process forked by a thread inherits
// that thread's network namespace, and Do keeps the calling goroutine on a thread
// inside the namespace until it returns.
package runner
