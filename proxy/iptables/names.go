package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// Top-level chains, shared by all services (kube-proxy proxier.go constants).
const (
	chainServices         = "KUBE-SERVICES"
	chainExternalServices = "KUBE-EXTERNAL-SERVICES"
	chainNodePorts        = "KUBE-NODEPORTS"
	chainPostrouting      = "KUBE-POSTROUTING"
	chainMarkMasq         = "KUBE-MARK-MASQ"
	chainForward          = "KUBE-FORWARD"
	chainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	chainKubeletFirewall  = "KUBE-FIREWALL"
)

// Prefixes of the per-service nat chains. kube-proxy deletes any nat chain with one of
// these prefixes that its current rules do not use (isServiceChainName).
const (
	prefixClusterPolicy = "KUBE-SVC-"
	prefixLocalPolicy   = "KUBE-SVL-"
	prefixFirewall      = "KUBE-FW-"
	prefixExternal      = "KUBE-EXT-"
	prefixEndpoint      = "KUBE-SEP-"
)

// IsServiceChain reports whether a nat chain name is one of the per-service chains the
// generator owns (KUBE-SVC-, KUBE-SVL-, KUBE-SEP-, KUBE-FW-, KUBE-EXT-).
func IsServiceChain(chain string) bool {
	for _, p := range []string{prefixClusterPolicy, prefixLocalPolicy, prefixEndpoint, prefixFirewall, prefixExternal} {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}

// chainName is prefix + the first 16 characters of base32(sha256(concatenated parts)).
// Chain names must stay within iptables' 28 characters; 16 base32 characters never reach
// the padding. Hashing goes through stack buffers: a sync hashes every endpoint.
func chainName(prefix string, parts ...string) string {
	var scratch [192]byte
	in := scratch[:0]
	for _, p := range parts {
		in = append(in, p...)
	}
	sum := sha256.Sum256(in)
	var encoded [56]byte
	base32.StdEncoding.Encode(encoded[:], sum[:])
	return prefix + string(encoded[:16])
}

// portChains are the names of a service port's chains. All four share one hash of
// servicePortName+protocol (portProtoHash in kube-proxy).
type portChains struct {
	cluster  string // KUBE-SVC-: endpoints for Cluster traffic policy
	local    string // KUBE-SVL-: local endpoints for Local traffic policy
	firewall string // KUBE-FW-: loadBalancerSourceRanges
	external string // KUBE-EXT-: model.NodePort, externalIP and LB traffic
}

// newPortChains names the chains of a port; protocol is lowercase ("tcp").
func newPortChains(portName, protocol string) portChains {
	cluster := chainName(prefixClusterPolicy, portName, protocol)
	hash := cluster[len(prefixClusterPolicy):]
	return portChains{
		cluster:  cluster,
		local:    prefixLocalPolicy + hash,
		firewall: prefixFirewall + hash,
		external: prefixExternal + hash,
	}
}

// endpointChain names the KUBE-SEP- chain of one endpoint of a port; hostPort is the
// endpoint as net.JoinHostPort writes it ("10.0.0.1:80", "[fd00::1]:80").
func endpointChain(portName, protocol, hostPort string) string {
	return chainName(prefixEndpoint, portName, protocol, hostPort)
}
