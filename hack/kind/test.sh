#!/usr/bin/env bash
# `make test-kind`: everything the kind e2e suite (test/kind, build tag `kind`) needs,
# then the suite. Each step is cached (see README.md), so a second run costs the
# cluster check and the tests:
#   dockerd (setup-docker.sh); the kind CLI and kubectl (build-binaries.sh); the node
#   image (node-image.sh); the netshoot and whoami stand-ins (tool-images.sh); herald's
#   images from this tree (herald-images.sh); bin/herald; bin/helm; the cluster
#   herald-kind with kubeProxyMode none (up.sh, reused when it runs); go test.
# Each step's time is logged ("<step>: Ns"), the cold/warm figures of README.md.
# Environment: GOTEST_FLAGS (-v), RUN (a -run pattern), CLUSTER (herald-kind),
# HERALD_KIND_KEEP=1 (leave the client container running afterwards).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
t0=$SECONDS
timed "packages" "$root/hack/setup.sh" kind
timed "docker" "$root/hack/kind/setup-docker.sh" ||
	die "Docker cannot run here (see above), so the kind suite cannot run: make test KIND_SUITE=0 runs every other test"
# The node image may be cached while bin/ is not (a fresh worktree): the suite needs
# the kind CLI and kubectl whatever the image.
timed "kind CLI and kubernetes binaries" "$root/hack/kind/build-binaries.sh" kind kubernetes
timed "node image" "$root/hack/kind/node-image.sh" >/dev/null
read -r netshoot whoami < <("$root/hack/kind/tool-images.sh" netshoot whoami | xargs)
timed "herald images" "$root/hack/kind/herald-images.sh" >/dev/null
timed "bin/herald" make -C "$root" --no-print-directory build >/dev/null
helm=$(timed "bin/helm" "$root/hack/setup-helm.sh")
KUBE_PROXY_MODE=none SMOKE=0 timed "cluster" "$root/hack/kind/up.sh"
log "prepared in $((SECONDS - t0))s"

t1=$SECONDS
cd "$root"
status=0
KIND="$KIND" KUBECTL="$KUBECTL" HELM="$helm" HERALD="$root/bin/herald" CLUSTER="$CLUSTER" \
	NETSHOOT_IMAGE="$netshoot" WHOAMI_IMAGE="$whoami" \
	go test -tags kind -count=1 -timeout 60m ${GOTEST_FLAGS:--v} ${RUN:+-run "$RUN"} ./test/kind/ || status=$?
log "tests: $((SECONDS - t1))s (exit $status); make test-kind: $((SECONDS - t0))s in all"
exit $status
