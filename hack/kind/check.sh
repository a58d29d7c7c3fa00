#!/usr/bin/env bash
# Says in seconds what the offline kind setup has and lacks on this machine, and what
# makes each missing piece. Exits 1 when something that no script here installs is
# missing (root, Go, gcc, disk); built artefacts that are missing are only listed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
fatal=0
ok() { printf '  ok       %s\n' "$*" >&2; }
todo() { printf '  missing  %s\n' "$*" >&2; }
bad() { printf '  MISSING  %s\n' "$*" >&2; fatal=1; }

log "what the offline kind cluster needs (versions: kind $KIND_VERSION, Kubernetes $K8S_VERSION)"
[[ $(id -u) == 0 ]] && ok "root" || bad "root (dockerd, debootstrap and apt need it)"
command -v go >/dev/null && ok "$(go version | cut -d' ' -f3)" || bad "go: the Go toolchain (1.26) on PATH"
command -v gcc >/dev/null && ok "gcc" || bad "gcc (apt-get install gcc libc6-dev): cgo for containerd and runc, the static pause"
[[ -f /usr/include/seccomp.h ]] && ok "libseccomp-dev" || todo "libseccomp-dev (apt-get install libseccomp-dev): runc"
command -v debootstrap >/dev/null && ok "debootstrap" || todo "debootstrap (apt-get install debootstrap)"
free_gb=$(df -Pk "$root" /var/lib 2>/dev/null | awk 'NR > 1 {print int($4 / 1048576)}' | sort -n | head -1)
((free_gb >= 15)) && ok "disk: ${free_gb} GiB free" || bad "disk: ${free_gb} GiB free, about 15 GiB needed (Go cache, images, 4 nodes)"
if docker info >/dev/null 2>&1; then
	ok "docker $(docker version -f '{{.Server.Version}}' 2>/dev/null), runtime $(docker info -f '{{.DefaultRuntime}}')"
	for b in kind-$KIND_VERSION kubernetes-$K8S_VERSION etcd-$ETCD_VERSION coredns-$COREDNS_VERSION \
		containerd-$CONTAINERD_VERSION runc-$RUNC_VERSION crictl-$CRICTL_VERSION; do
		[[ -d $KBIN/$b ]] && ok "bin/kind/$b" || todo "bin/kind/$b (hack/kind/build-binaries.sh)"
	done
	n=$(docker images -q --filter reference='herald.local/kind-node' | wc -l)
	((n > 0)) && ok "node images: $(docker images --format '{{.Repository}}:{{.Tag}}' --filter reference='herald.local/kind-node' | tr '\n' ' ')" ||
		todo "node image (hack/kind/node-image.sh)"
else
	todo "a running Docker engine (hack/kind/setup-docker.sh)"
fi
exit $fatal
