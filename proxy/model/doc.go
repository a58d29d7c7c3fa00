// Package model is the proxier's input and the decisions both rule generators share.
//
// A shell reduces Services and EndpointSlices to Service values (types.go); Resolve
// turns them into the service ports of one IP family (kube-proxy's service and
// endpoint trackers as a pure function, skipping and reporting what cannot be
// expressed); PlanPort decides, per port and node, which endpoints serve Cluster and
// Local traffic and which chains exist (kube-proxy's CategorizeEndpoints and the
// first half of its syncProxyRules). The iptables and nftables generators write rules
// from a Plan; neither decides again. ChangedServices names what a partial sync
// rewrites.
//
// Files: types.go (input), node.go (per-node settings both generators read), ports.go
// (Resolve), endpoints.go (endpoint collection and Categorize), plan.go (PlanPort),
// changes.go (partial syncs), problems.go (skipped input).
package model
