// Package netlab is the lab's lower layer: it builds kind-like networks out of Linux
// network namespaces on one machine, so that real processes (etcd, kube-apiserver,
// herald speakers) run on separate "nodes" joined by one Ethernet segment, and it
// starts, records and stops those processes (Proc, Process, Spawn).
//
// A Lab is a bridge (br0) inside a namespace of its own, <prefix>br; each Host is a
// namespace <prefix><name> whose eth0 is one end of a veth pair, the other end (v<name>)
// being a port of br0. Like a docker network, the subnet's first address is the
// gateway, configured on br0, and hosts get a default route through it; the bridge
// namespace forwards nothing, so nothing leaves the lab.
//
// The root network namespace is never changed: veth pairs are created inside the lab's
// namespaces (neither end ever appears in the root namespace) and every command runs
// with `ip -n` or `ip netns exec`. A process in the root namespace (the go test) reaches
// the lab through sockets made inside a host's namespace: Host.DialContext,
// Host.Listen, Host.Ping.
//
// Names. Everything the lab creates is named from a caller-chosen prefix of at least
// three characters from [a-z0-9-] ending in "-" (say "hl-"), and host names are
// [a-z0-9]+, so the namespaces of a lab are exactly those matching <prefix>[a-z0-9]+.
// Because host names have no "-", the prefixes "hl-" and "hl-e2e-" never claim each
// other's namespaces. Interface names (limited to 15 bytes) live inside the lab's
// namespaces and carry no prefix.
//
// Cleanup. Lab.Close stops the processes started through the lab by PID, then deletes
// the namespaces it created; it works on a half-built lab and twice. Cleanup(prefix,
// runDir) removes what a crashed run left behind: the processes recorded in
// runDir/pids whose command line still matches, then every namespace of the prefix.
// As a backstop, both also kill any process still inside one of those namespaces
// (`ip netns pids`): those can only descend from processes the lab started, and envtest
// gives etcd and kube-apiserver process groups of their own, so killing the group of
// the process the lab started does not reach them. Without that a namespace would
// outlive its deletion for as long as they run.
//
// Everything needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); Check says so readably.
package netlab
