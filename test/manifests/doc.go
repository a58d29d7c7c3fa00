// Package manifests tests herald's deployment manifests (config/, rendered into
// config/manifests/herald.yaml):
//
//   - rbac_test.go, without root or a cluster: no Role or ClusterRole uses a wildcard;
//     every hand-written rule says why it is there; for each component's ServiceAccount,
//     as bound in the rendered manifest, the roles grant at least what the
//     +kubebuilder:rbac markers ask for (config/rbac, generated) and nothing the markers
//     do not, except the narrowings and extras listed there with their reasons.
//   - render_test.go: config/manifests/herald.yaml is what config/default renders.
//   - lab_test.go, as root with the binaries of hack/setup-test-binaries.sh: every
//     manifest applies with server-side dry-run to a real kube-apiserver; the
//     controller's Pod passes Pod Security "restricted" and the speaker's needs
//     "privileged"; and herald's controller (two replicas, leader election) and speakers
//     run in a network-namespace lab under the manifests' ServiceAccounts (kubeconfigs
//     holding their tokens), allocate and announce an address, and are never refused
//     by the API server.
//   - wrapper_test.go, as root: the speaker image's iptables wrapper picks the node's
//     iptables backend.
//
// The lab tests fail, never skip, without root or without the binaries, saying what
// is missing.
package manifests
