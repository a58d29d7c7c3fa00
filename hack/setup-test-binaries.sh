#!/usr/bin/env bash
# Builds the real Kubernetes control-plane binaries that envtest, the demo and the lab run:
# kube-apiserver, kube-controller-manager and kubectl at $K8S_VERSION, and etcd at
# $ETCD_VERSION, all from the Go module proxy (there is no other download site here).
# The result lands in bin/k8s/<k8s>-<etcd>/ and is reused while the version stamp matches,
# so running this again is cheap. Prints the directory (for KUBEBUILDER_ASSETS) on stdout.
# It also puts the Prometheus Operator's PodMonitor and PrometheusRule CRDs (from the
# prometheus-operator Go module at $PROMETHEUS_OPERATOR_VERSION) in monitoring-crds/
# there, so that tests can check config/prometheus against their schemas.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.5.21}
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/bin/k8s/${K8S_VERSION}-${ETCD_VERSION}"
stamp="$dest/.stamp"
want="k8s=${K8S_VERSION} etcd=${ETCD_VERSION}"
PROMETHEUS_OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:-0.85.0}

log() { echo "setup-test-binaries: $*" >&2; }

# fetch_monitoring_crds copies two CRDs out of the prometheus-operator module (its
# example/ directory ships them) into $dest/monitoring-crds, once per version.
fetch_monitoring_crds() {
  local out="$dest/monitoring-crds" mstamp="$dest/monitoring-crds/.stamp"
  [[ -f "$mstamp" && "$(cat "$mstamp")" == "$PROMETHEUS_OPERATOR_VERSION" ]] && return 0
  local tmp dir
  tmp=$(mktemp -d)
  printf 'module herald.dev/monitoringcrds\n\ngo 1.26\n' >"$tmp/go.mod"
  dir=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json \
    "github.com/prometheus-operator/prometheus-operator@v${PROMETHEUS_OPERATOR_VERSION}" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  rm -rf "$tmp"
  [[ -n "$dir" ]] || { log "could not download prometheus-operator v${PROMETHEUS_OPERATOR_VERSION}"; return 1; }
  mkdir -p "$out"
  for crd in podmonitors prometheusrules; do
    cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_${crd}.yaml" "$out/"
  done
  chmod -R u+w "$out"
  echo "$PROMETHEUS_OPERATOR_VERSION" >"$mstamp"
}

mkdir -p "$dest"
fetch_monitoring_crds
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "$dest"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# k8s.io/kubernetes requires its staging modules at v0.0.0; pin each to the release.
staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go
  cloud-provider cluster-bootstrap code-generator component-base component-helpers
  controller-manager cri-api cri-client csi-translation-lib dynamic-resource-allocation
  endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy
  kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission sample-apiserver)

build_kubernetes() {
  local mod="$work/kubernetes"
  mkdir -p "$mod"
  {
    echo "module herald.dev/testbinaries"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v${K8S_VERSION}"
    echo
    for m in "${staging[@]}"; do
      echo "replace k8s.io/$m => k8s.io/$m v0.${K8S_VERSION#1.}"
    done
  } >"$mod/go.mod"
  cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  log "building kube-apiserver, kube-controller-manager, kubectl v${K8S_VERSION} (minutes on a cold cache)"
  (cd "$mod" && GOFLAGS=-mod=mod go mod tidy -e >&2 &&
    CGO_ENABLED=0 go build -tags tools -trimpath -o "$dest/" \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kubectl >&2)
}

build_etcd() {
  local mod="$work/etcd"
  mkdir -p "$mod"
  printf 'module herald.dev/etcdbinary\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" >"$mod/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$mod/tools.go"
  log "building etcd v${ETCD_VERSION}"
  (cd "$mod" && GOFLAGS=-mod=mod go mod tidy -e >&2 &&
    CGO_ENABLED=0 go build -tags tools -trimpath -o "$dest/etcd" go.etcd.io/etcd/server/v3 >&2)
}

build_etcd
build_kubernetes
for b in etcd kube-apiserver kube-controller-manager kubectl; do
  [[ -x "$dest/$b" ]] || { log "missing $dest/$b after build"; exit 1; }
done
echo "$want" >"$stamp"
log "ready in $dest"
echo "$dest"
