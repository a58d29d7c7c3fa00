#!/usr/bin/env bash
# Deletes the kind cluster of up.sh (and the demo's client container, if any). The
# images and the docker network stay: they are the cache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
for c in "${CLIENT:-mypc}" herald-kind-client; do docker rm -f "$c" >/dev/null 2>&1 || true; done
if [[ -x $KIND ]]; then "$KIND" delete cluster --name "$CLUSTER"; else log "no kind CLI built: nothing to delete"; fi
