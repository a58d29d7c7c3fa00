// Package e2e holds the end-to-end tests that run against a lab of network namespaces
// (internal/lab, built through its harness internal/lab/labtest): a control plane
// running real etcd, kube-apiserver and kube-controller-manager plus herald's
// controller, worker namespaces running herald speakers, and a client namespace asking
// who has each VIP. They need root; without it they fail saying so.
package e2e
