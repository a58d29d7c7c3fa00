// Package manifests tests herald's deployment manifests (config/, rendered into
// config/manifests/herald.yaml):
//
//   - rbac_test.go, without root or a cluster: no Role or ClusterRole uses a wildcard;
//     every hand-written rule says why it is there; for each component's ServiceAccount,
//     as bound in the rendered manifest, the roles grant at least what the
//     +kubebuilder:rbac markers ask for (config/rbac, generated) and nothing the markers
//     do not, except the narrowings and extras listed there with their reasons.
//   - render_test.go: config/manifests/herald.yaml is what config/default renders.
//   - prometheus_test.go: herald.yaml installs the ClusterRole herald-metrics-reader
//     (get /metrics) without binding it; config/prometheus's PodMonitors scrape over
//     HTTPS with the token of a ServiceAccount bound to it, and label targets by node.
//   - lab_test.go, as root with the binaries of hack/setup-test-binaries.sh: every
//     manifest applies with server-side dry-run to a real kube-apiserver; the
//     controller's Pod passes Pod Security "restricted" and the speaker's needs
//     "privileged"; and herald's controller (two replicas, leader election) and speakers
//     run in a network-namespace lab under the manifests' ServiceAccounts (kubeconfigs
//     holding their tokens, each speaker's bound to a Pod on its node), allocate and announce an address, and are never refused
//     by the API server; their HTTPS metrics endpoints answer 401 without a token, 403
//     to a ServiceAccount without herald-metrics-reader and 200 to config/prometheus's
//     reader, as the lab's kube-apiserver decides.
//   - identity_test.go, with the binaries: on envtest's kube-apiserver, a speaker token
//     bound to a pod on node-a writes node-b's heartbeat before the admission policy
//     herald-speaker-own-node is installed, and after it writes only node-a's record,
//     heartbeat and VIPStatus owner: node-b's, the controller's Leases and anything
//     written with an unbound token are refused with the policy's message.
//   - access_test.go, with the binaries: SubjectAccessReviews (kubectl auth can-i) of
//     what the manifest's ServiceAccounts may do: no Service patch for the controller,
//     none of the controller's objects for the speaker that RBAC can name.
//   - wrapper_test.go, as root: the speaker image's iptables wrapper picks the node's
//     iptables backend.
//
// The lab tests fail, never skip, without root or without the binaries, saying what
// is missing.
package manifests
