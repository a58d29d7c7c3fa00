// Package compare holds the oracle test of herald's iptables rule generator: it
// generates random Services and EndpointSlices, feeds them to kube-proxy v1.36.3's
// iptables proxier (package oracle) and to herald.dev/herald/proxy/iptables, and
// requires the same iptables-restore input and the same end state. See compare_test.go.
package compare
