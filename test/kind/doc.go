// Package kind holds the end-to-end tests that run on a real kind cluster: kind's node
// containers with a real kubelet, containerd and control plane on one Docker network,
// and a netshoot-like client container on that network asking for the VIPs, as in the
// MetalLB-on-kind walkthrough. The lab of test/e2e (network namespaces) stands in for
// most of this; these tests check what only a real cluster shows: herald's images and
// manifests (config/kind) and chart (charts/herald) on a real API server, herald's
// proxier as the only Service proxy (kubeProxyMode: none, CoreDNS and `kubernetes`
// included), a node container stopped or frozen (docker stop, docker pause) and the
// real node lifecycle that follows.
//
// The tests carry the build tag `kind`, so `go test ./...` does not build them. Run them
// with `make test-kind`, which prepares Docker, the images, the cluster and the tools
// (hack/kind/test.sh) and then runs `go test -tags kind ./test/kind/`. Run by hand with
// the tag but without what they need, they fail saying what is missing; they never
// skip.
package kind
