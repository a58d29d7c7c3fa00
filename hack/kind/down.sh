#!/usr/bin/env bash
# Deletes the kind cluster of up.sh (and the demo's client container, if any). The
# images and the docker network stay: they are the cache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
for c in "${CLIENT:-mypc}" herald-kind-client; do docker rm -f "$c" >/dev/null 2>&1 || true; done
if [[ -x $KIND ]]; then
  "$KIND" delete cluster --name "$CLUSTER"
  exit
fi
# No kind CLI here: another clone of the project may have made the cluster. Its nodes
# are containers labelled with the cluster's name; removing them is what kind's
# delete does (it also drops the cluster from the kubeconfig, which is left as is).
nodes=$(docker ps -aq --filter "label=io.x-k8s.kind.cluster=$CLUSTER" 2>/dev/null || true)
if [[ -z $nodes ]]; then
  log "no kind CLI built and no cluster $CLUSTER: nothing to delete"
  exit
fi
log "no kind CLI built here: removing the node containers of $CLUSTER"
# shellcheck disable=SC2086 # one container id per word
docker rm -f $nodes >/dev/null
