// Package compare holds the oracle tests of herald's rule generators: it generates
// random Services and EndpointSlices, feeds them to kube-proxy v1.36.3's iptables
// proxier (package oracle) and herald.dev/herald/proxy/iptables, requiring the same
// iptables-restore input and end state (compare_test.go), and to kube-proxy's nftables
// proxier (package nftoracle) and herald.dev/herald/proxy/nftables, requiring the same
// table after every sync (nft_test.go).
package compare
