// Package labtest is the one harness of the tests that run in network namespaces: the
// end-to-end tests, the manifests' tests, the proxier's and the layer-2 responders'.
// It fails a test (never skips it) where namespaces cannot be made, saying what is
// missing, and removes what it built, by name and PID, when the test ends.
//
// From the ground up: Namespaces for tests that cable namespaces themselves; NewNet, a
// bridge with hosts (netlab); NewControlPlane, that and real etcd, kube-apiserver and
// kube-controller-manager with the herald binary built; NewCluster, that and herald's
// manifest installed, kubeconfigs of its ServiceAccounts, worker Nodes and a client.
// The full lab of `make demo` (lab.Up) is UpLab. The waits (Eventually, WaitHTTP,
// WaitIngress, WaitARP) say on failure what they saw last.
package labtest
