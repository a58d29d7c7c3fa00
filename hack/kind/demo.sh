#!/usr/bin/env bash
# hack/kind-demo.sh, the walkthrough on kind, on a machine with no registry: the
# cluster comes from up.sh (offline node image, static CNI, kubeProxyMode none as the
# walkthrough's herald setup has it), herald's images from herald-images.sh, and the
# netshoot and whoami stand-ins from tool-images.sh. `demo.sh down` removes it all.
# Environment: CLUSTER (herald-kind), MONITORING (no: its charts need a registry),
# FAILOVER (yes).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export CLUSTER KUBECTL MONITORING=${MONITORING:-no}
# kind-demo.sh calls `kind`: ours, built for this version.
PATH="$(dirname "$KIND"):$PATH"
export PATH
if [[ ${1:-} == down ]]; then exec "$root/hack/kind-demo.sh" down; fi

"$root/hack/setup.sh" kind
"$root/hack/kind/setup-docker.sh"
"$root/hack/kind/build-binaries.sh" kind kubernetes
KUBE_PROXY_MODE=none SMOKE=0 "$root/hack/kind/up.sh"
"$root/hack/kind/herald-images.sh" >/dev/null
read -r netshoot whoami < <("$root/hack/kind/tool-images.sh" netshoot whoami | xargs)
# After a docker start the node's routes to the other podCIDRs are gone: static-cni.sh
# puts them back (kindnetd would).
OFFLINE=no BUILD_IMAGES=no CLIENT_IMAGE=$netshoot WHOAMI_IMAGE=$whoami \
	AFTER_NODE_START="$root/hack/kind/static-cni.sh $CLUSTER $POD_SUBNET" "$root/hack/kind-demo.sh"
