// Package iptables generates the iptables-restore input of kube-proxy's iptables mode
// (k8s.io/kubernetes v1.36, pkg/proxy/iptables) as a pure function of a Snapshot.
//
// The generator has no I/O: a shell builds a Snapshot from Services, EndpointSlices and
// the node's settings, calls Generate once per IP family, and hands Payload.Bytes() to
// `iptables-restore --noflush --counters`. Chain names, rule text, rule order within each
// chain and the layout of the restore input are those of kube-proxy, so that the result
// can be compared with kube-proxy's own output (see /work/shared/reference/kube-proxy.md).
//
// The one intended difference in ordering: kube-proxy walks its service map in Go map
// order, so the order of services inside KUBE-SERVICES, KUBE-NODEPORTS and the filter
// chains changes from run to run. This package walks services sorted by namespace, name,
// port name and protocol, which is one of the orders kube-proxy may produce.
//
// Files: types.go (input), node.go (per-node settings), names.go (chain-name hashing),
// ports.go (per-family view of a service port), endpoints.go (endpoint selection),
// nat.go and filter.go (per-service rules), toplevel.go (fixed chains), generate.go
// (assembly and Payload), changes.go (partial syncs), problems.go (skipped input).
package iptables
