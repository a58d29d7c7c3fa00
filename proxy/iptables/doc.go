// Package iptables generates the iptables-restore input of kube-proxy's iptables mode
// (k8s.io/kubernetes v1.36, pkg/proxy/iptables) as a pure function of a Snapshot.
//
// The generator has no I/O: a shell builds a Snapshot from Services, EndpointSlices and
// the node's settings, calls Generate once per IP family, and hands Payload.Bytes() to
// `iptables-restore --noflush --counters` (ip6tables-restore for IPv6). Chain names,
// rule text, rule order within each chain and the layout of the restore input are those
// of kube-proxy, so that the result can be compared with kube-proxy's own output
// (hack/kporacle runs kube-proxy's proxier as a library to do so).
//
// A runner's loop, as kube-proxy's syncProxyRules:
//
//	full := needFull // first sync, failed restore, node settings changed, ...
//	opts := Options{ExistingNATChains: natChainsFromIPTablesSave}
//	if !full {
//		opts.Changed = ChangedServices(lastApplied, next)
//	}
//	payload, err := Generate(next, opts)
//	// ensure JumpRules() on full syncs, restore payload.Bytes(), log payload.Problems
//
// Node fields that kube-proxy probes from the host (RandomFully, ConntrackTCPLiberal,
// NFAcct, InterfaceAddrs) are inputs here; they change the text the same way they change
// kube-proxy's.
//
// The one intended difference in ordering: kube-proxy walks its service map in Go map
// order, so the order of services inside KUBE-SERVICES, KUBE-NODEPORTS and the filter
// chains changes from run to run. This package walks services sorted by namespace, name,
// port name and protocol, which is one of the orders kube-proxy may produce.
//
// The input types and the per-port decisions (which endpoints, which chains) come from
// package model; this package only names chains and writes rule text.
//
// Files: snapshot.go (input), node.go (per-node settings), names.go (chain-name
// hashing), plan.go (chains and verdicts per port), nat.go and filter.go (per-service
// rules), toplevel.go (shared chains), jumps.go (rules in built-in chains), generate.go
// (assembly and Payload), lines.go (restore-input lines), probability.go
// (load-balancing probabilities).
package iptables
