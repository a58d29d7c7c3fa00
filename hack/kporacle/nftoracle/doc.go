// Package nftoracle runs kube-proxy's real nftables proxier
// (k8s.io/kubernetes/pkg/proxy/nftables, v1.36.3) for one IP family as a
// library, so herald's nftables rule generator can be checked against it.
//
// By default the proxier writes to knftables' in-memory Fake, which validates
// each transaction the way the kernel would (objects must exist, jumps and
// gotos must target existing chains) and keeps a simulated table; nothing on
// the machine changes. Options.NFT can instead be a real knftables.Interface,
// e.g. one built inside a network namespace with InNetNS, to run the same
// syncs against the kernel (benchmarks, or checking that nft accepts them).
// Conntrack, the health-check server and the host's interface list are fakes
// either way, so no port is opened and no conntrack entry is touched.
//
//	o, err := nftoracle.New(nftoracle.Options{NodeName: "node-a", NodeIP: net.ParseIP("192.168.0.2")})
//	o.OnServiceAdd(svc)
//	o.OnEndpointSliceAdd(slice)
//	full, err := o.Sync()        // kube-proxy's initial full sync
//	o.OnEndpointSliceUpdate(slice, changed)
//	partial, err := o.Sync()     // a partial sync: only changed services
//	table, err := o.Dump()       // the Fake's sorted ruleset after all syncs
//
// Linux only, like kube-proxy's nftables package.
package nftoracle
