// Package lab builds and operates the herald lab: a kind-like cluster made of Linux
// network namespaces on one machine, standing in for kind, where the end-to-end tests
// and `make demo` run. hack/lab is its command line. Its subpackages: netlab, the lower
// layer (namespaces, the bridge, hosts, the processes started in them, the control
// plane), and labtest, the harness every test in namespaces builds on.
//
// Topology: a bridge namespace <prefix>br with the kind network
// 172.18.0.0/16 (gateway .1); <prefix>cp at 172.18.0.2 running real etcd,
// kube-apiserver and kube-controller-manager (the real EndpointSlice controller) and
// herald's controller; workers <prefix>worker, <prefix>worker2, ... at .3, .4, ... each
// with a Node of that name (InternalIP, pod CIDR 10.244.N.0/24), a lab agent standing in
// for the kubelet (package agent) and a herald speaker; and <prefix>client at
// 172.18.0.100, the walkthrough's netshoot, with no route to pods but through the VIPs.
// Workers forward and route each other's pod CIDRs; pods get namespaces of their own,
// <prefix>pod<name><hash>, made by the agents.
//
// Dual-stack (Config.DualStack, `hack/lab up --dual-stack`), as kind's network is: every
// host has an IPv6 address too in fc00:f853:ccd:e793::/64 (::2 the control plane, ::3
// onwards the workers, ::100 the client), Nodes both InternalIPs and pod CIDRs
// (fd00:10:244:N::/64), pods both addresses, kube-apiserver the ClusterIP ranges
// 10.200.1.0/24 and fd00:10:96::/112, the speakers' proxier both cluster CIDRs. NDPWatch
// is how the client sees who answers for an IPv6 VIP, as ARPWatch is for IPv4
// (WatchNeighbour picks by family; MeasureFailovers measures both VIPs of a dual-stack
// Service under one fault).
//
// Identities. herald's CRDs, namespace, ServiceAccounts and RBAC come from
// config/manifests/herald.yaml (InstallManifest, server-side apply; not its workloads),
// and the controller and speakers run under the manifest's ServiceAccounts, with
// kubeconfigs holding their tokens (controller.kubeconfig, speaker.kubeconfig in the run
// directory), so whatever runs in the lab also shows the manifest's RBAC is enough;
// State.Refusals finds any request the API server refused them. The agents, kubectl
// and the tests' clients are cluster admin.
//
// Lifetime. Up starts every long-running process through netlab (a process group of
// its own, a log and a pid file in the run directory, a netlab.Proc in the state) and
// returns; the processes do
// not depend on the process that ran Up. Everything Up built is recorded in
// <run directory>/lab.json, from which the later commands (status, the faults, kubectl,
// exec, Down) work. Down removes every namespace of the prefix with whatever runs in it,
// from any process, after a crash or a half-finished Up too, and may run twice. Nothing
// is ever changed in the root network namespace.
package lab
