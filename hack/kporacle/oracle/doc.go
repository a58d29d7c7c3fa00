// Package oracle runs kube-proxy's real iptables proxier
// (k8s.io/kubernetes/pkg/proxy/iptables, v1.36.3) as a library, so herald's
// rule generator can be checked against it. The proxier talks to kube-proxy's
// own fake iptables, which captures every iptables-restore payload and keeps a
// simulated copy of the tables; conntrack, nfacct, sysctls, the health-check
// server and the host's interfaces are fakes too, so nothing on the machine
// changes and no port is opened.
//
//	o, err := oracle.New(oracle.Options{NodeName: "node-a", ClusterCIDRs: []string{"10.0.0.0/8"}})
//	o.OnServiceAdd(svc)
//	o.OnEndpointSliceAdd(slice)
//	full, err := o.Sync()        // kube-proxy's initial full sync
//	o.OnEndpointSliceUpdate(slice, changed)
//	partial, err := o.Sync()     // a partial sync, as kube-proxy does next
//	state, err := o.Dump()       // resulting tables, iptables-save format
//
// Linux only, like kube-proxy's iptables package.
package oracle
