// Package e2e holds the end-to-end tests that run against the network-namespace lab
// (hack/lab). The lab and these tests come with issue 5; the controller's behaviour is
// tested today against a real kube-apiserver in controllers/ and api/.
package e2e
