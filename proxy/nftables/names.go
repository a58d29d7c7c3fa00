package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"net"
	"strings"

	"sigs.k8s.io/knftables"
)

// TableName is the nftables table herald programs in the ip and ip6 families. kube-proxy
// uses "kube-proxy"; herald's own name is how the proxier tells its table from
// kube-proxy's, which leaves no other mark, so it can stay off when kube-proxy runs.
// Every chain, set and map inside has kube-proxy's name.
const TableName = "herald"

// tableComment is the table's comment, shown by `nft list table`.
const tableComment = "rules for herald's proxier (kube-proxy nftables mode)"

// Base chains, hooked to netfilter, and the regular chains they jump to (kube-proxy's
// names, pkg/proxy/nftables).
const (
	chainFilterPreroutingPreDNAT = "filter-prerouting-pre-dnat"
	chainFilterOutputPreDNAT     = "filter-output-pre-dnat"
	chainFilterInput             = "filter-input"
	chainFilterForward           = "filter-forward"
	chainFilterOutput            = "filter-output"
	chainNATPrerouting           = "nat-prerouting"
	chainNATOutput               = "nat-output"
	chainNATPostrouting          = "nat-postrouting"

	chainServices               = "services"
	chainServiceEndpointsCheck  = "service-endpoints-check"
	chainNodePortEndpointsCheck = "nodeport-endpoints-check"
	chainReject                 = "reject-chain"
	chainClusterIPsCheck        = "cluster-ips-check"
	chainFirewallCheck          = "firewall-check"
	chainMasquerading           = "masquerading"
)

// Sets and maps.
const (
	mapServiceIPs         = "service-ips"
	mapServiceNodePorts   = "service-nodeports"
	setNodePortIPs        = "nodeport-ips"
	setClusterIPs         = "cluster-ips"
	mapNoEndpointServices = "no-endpoint-services"
	mapNoEndpointNodePort = "no-endpoint-nodeports"
	mapFirewallIPs        = "firewall-ips"
	setHairpin            = "hairpin-connections"
)

// Prefixes of the per-service chains and sets.
const (
	prefixClusterPolicy = "service-"
	prefixLocalPolicy   = "local-"
	prefixExternal      = "external-"
	prefixEndpoint      = "endpoint-"
	prefixAffinity      = "affinity-"
	prefixFirewall      = "firewall-"
)

// nameBaseMax is the longest base a per-service name may have: the longest prefix
// (16 characters with its hyphen) must still fit nftables' name limit.
const nameBaseMax = knftables.NameLengthMax - 16

// IsServiceChain reports whether a chain is one of the per-service chains: their names
// hold the service's "namespace/name", and no shared chain has a "/".
func IsServiceChain(chain string) bool { return strings.Contains(chain, "/") }

// hashed prefixes name with 8 characters of base32(sha256(name)), so that names stay
// unique when cut and distinct at a glance, and cuts the result to nameBaseMax.
func hashed(name string) string {
	sum := sha256.Sum256([]byte(name))
	out := base32.StdEncoding.EncodeToString(sum[:])[:8] + "-" + name
	if len(out) > nameBaseMax {
		out = out[:nameBaseMax-3] + "..."
	}
	return out
}

// portNameBase is "HASH-namespace/name/protocol/port" for a service port.
func portNameBase(namespace, name, protocol, port string) string {
	return hashed(namespace + "/" + name + "/" + protocol + "/" + port)
}

// endpointNameBase is "HASH-namespace/name/protocol/port__ip/port" for one endpoint of
// a service port; an IPv6 address has its colons turned into dots, which a name may hold.
func endpointNameBase(namespace, name, protocol, port, hostPort string) string {
	ip, epPort, _ := net.SplitHostPort(hostPort)
	ip = strings.ReplaceAll(ip, ":", ".")
	return hashed(namespace + "/" + name + "/" + protocol + "/" + port + "__" + ip + "/" + epPort)
}
