#!/usr/bin/env bash
# Builds the helm CLI at $HELM_VERSION from the Go module proxy (there is no other
# download site here), the way hack/setup-test-binaries.sh builds the Kubernetes
# binaries: a throwaway module that requires helm.sh/helm/v3, so herald's own go.mod
# never sees helm. The result is bin/helm/<version>/helm, reused while its version
# stamp matches, so running this again is cheap. Prints the binary's path on stdout.
# The chart tests (charts/) run this binary.
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-3.22.0}
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/bin/helm/${HELM_VERSION}"
stamp="$dest/.stamp"
want="helm=${HELM_VERSION} with-k8s-version"

log() { echo "setup-helm: $*" >&2; }

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dest/helm" ]]; then
  echo "$dest/helm"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest"
printf 'module herald.dev/helmbinary\n\ngo 1.26\n\nrequire helm.sh/helm/v3 v%s\n' "$HELM_VERSION" >"$work/go.mod"
printf '//go:build tools\n\npackage tools\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n' >"$work/tools.go"
log "building helm v${HELM_VERSION} (minutes on a cold cache)"
(cd "$work" && GOFLAGS=-mod=mod go mod tidy -e >&2)
# The variables helm's own release build sets: its version, and the Kubernetes version
# that lint and .Capabilities assume, derived from its client-go (v0.34 is 1.34).
client_go=$(cd "$work" && go list -f '{{.Version}}' -m k8s.io/client-go)
IFS=. read -r k8s_major k8s_minor _ <<<"${client_go#v}"
k8s_major=$((k8s_major + 1))
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=v${HELM_VERSION}"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=$k8s_major -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
done
(cd "$work" && CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "$ldflags" -o "$dest/helm" helm.sh/helm/v3/cmd/helm >&2)
[[ -x "$dest/helm" ]] || { log "missing $dest/helm after build"; exit 1; }
echo "$want" >"$stamp"
log "ready: $dest/helm"
echo "$dest/helm"
