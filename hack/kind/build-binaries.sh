#!/usr/bin/env bash
# Builds, from the Go module proxy (the only source of Go code this machine reaches),
# every binary the offline kind setup needs, each into bin/kind/<what>-<version>/:
#   kind CLI; kubeadm, kubelet, kubectl, kube-apiserver, kube-controller-manager,
#   kube-scheduler, kube-proxy (version-stamped); etcd; coredns; containerd, ctr,
#   containerd-shim-runc-v2; runc; crictl; pause (C, from the kubernetes module).
# A directory that exists is complete (each build lands in a temporary one, then is
# renamed), so a second run only checks. Usage: build-binaries.sh [what...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# gomod DIR MODULE... writes a throwaway module requiring exact versions; k8s.io's
# modules also pin the staging repos that k8s.io/kubernetes requires at v0.0.0.
gomod() {
	local dir=$1
	shift
	mkdir -p "$dir"
	{
		printf 'module herald.dev/kindbuild\n\ngo 1.26\n\n'
		for m in "$@"; do echo "require $m"; done
		if [[ "$*" == *k8s.io/kubernetes* ]]; then
			# Every staging module that kubernetes' own go.mod replaces with a local path
			# (the list changes between releases: v1.36 added cri-streaming, streaming).
			local kmod s
			kmod=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .GoMod)
			for s in $(sed -n 's#^[[:space:]]*k8s.io/\([a-z0-9-]*\) => ./staging/.*#\1#p' "$kmod"); do
				echo "replace k8s.io/$s => k8s.io/$s v0.${K8S_VERSION#v1.}"
			done
		fi
	} >"$dir/go.mod"
}

# gobuild DIR OUT PKG... [-- go build flags]: tidy the module in DIR, build PKGs into OUT.
gobuild() {
	local dir=$1 out=$2
	shift 2
	local pkgs=() flags=()
	while (($#)) && [[ $1 != -- ]]; do pkgs+=("$1"); shift; done
	(($#)) && shift && flags=("$@")
	{
		echo '//go:build tools'
		echo
		echo 'package tools'
		echo
		for p in "${pkgs[@]}"; do echo "import _ \"$p\""; done
	} >"$dir/tools.go"
	(cd "$dir" && GOFLAGS=-mod=mod heavy go mod tidy -e >&2 &&
		heavy go build -tags tools -trimpath "${flags[@]}" -o "$out/" "${pkgs[@]}" >&2)
}

# step NAME VERSION FUNC: run FUNC with $out (a fresh temp dir) unless bin/kind/NAME-VERSION exists.
step() {
	local name=$1 version=$2 fn=$3 dest="$KBIN/$1-$2"
	if [[ -d $dest ]]; then log "$name $version: cached"; return 0; fi
	out="$KBIN/.tmp-$name-$version"
	rm -rf "$out" && mkdir -p "$out"
	work=$(mktemp -d)
	timed "$name $version built" "$fn"
	rm -rf "$work"
	mv "$out" "$dest"
}

build_kind() { GOBIN="$out" CGO_ENABLED=0 heavy go install -trimpath "sigs.k8s.io/kind@$KIND_VERSION" >&2; }

build_kubernetes() {
	local v=${K8S_VERSION#v} ld="-s -w" p
	# What kubeadm and `kubectl version` read: without it everything says v0.0.0-master.
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=${v%%.*} -X $p.gitMinor=$(cut -d. -f2 <<<"$v")"
		ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
	done
	gomod "$work" "k8s.io/kubernetes $K8S_VERSION"
	CGO_ENABLED=0 gobuild "$work" "$out" k8s.io/kubernetes/cmd/{kubeadm,kubelet,kubectl,kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy} -- -ldflags "$ld"
	# pause, the sandbox image's only binary, is C in the same module.
	local src
	src=$(cd "$work" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
	heavy gcc -Os -static -Wall -o "$out/pause" "$src/build/pause/linux/pause.c" -DVERSION="$PAUSE_VERSION"
}

# etcd's own go.mod replaces its sibling modules with ../ paths; a wrapper module
# takes the released versions instead.
build_etcd() {
	gomod "$work" "go.etcd.io/etcd/server/v3 $ETCD_VERSION"
	CGO_ENABLED=0 gobuild "$work" "$out" go.etcd.io/etcd/server/v3 -- -ldflags "-s -w"
	mv "$out/v3" "$out/etcd" 2>/dev/null || mv "$out/server" "$out/etcd"
}

build_coredns() {
	gomod "$work" "github.com/coredns/coredns $COREDNS_VERSION"
	CGO_ENABLED=0 gobuild "$work" "$out" github.com/coredns/coredns -- -ldflags "-s -w"
}

# The tags kind's base image builds containerd with (no btrfs, zfs, devmapper snapshotters).
build_containerd() {
	gomod "$work" "github.com/containerd/containerd/v2 $CONTAINERD_VERSION"
	CGO_ENABLED=1 gobuild "$work" "$out" github.com/containerd/containerd/v2/cmd/{containerd,ctr,containerd-shim-runc-v2} -- \
		-tags "tools no_aufs no_zfs no_btrfs no_devmapper" \
		-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
}

# runc needs cgo (its nsenter) and libseccomp (Debian's libseccomp-dev).
build_runc() {
	gomod "$work" "github.com/opencontainers/runc $RUNC_VERSION"
	CGO_ENABLED=1 gobuild "$work" "$out" github.com/opencontainers/runc -- \
		-tags "tools seccomp" -ldflags "-s -w -X main.version=${RUNC_VERSION#v}"
}

build_crictl() {
	gomod "$work" "sigs.k8s.io/cri-tools $CRICTL_VERSION"
	CGO_ENABLED=0 gobuild "$work" "$out" sigs.k8s.io/cri-tools/cmd/crictl -- \
		-ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
}

command -v go >/dev/null || die "go is needed (Go 1.26)"
command -v jq >/dev/null || die "jq is needed: apt-get install jq"
command -v gcc >/dev/null || die "gcc is needed (cgo for containerd and runc, the static pause)"
[[ -f /usr/include/seccomp.h ]] || die "libseccomp-dev is needed to build runc: apt-get install libseccomp-dev"
mkdir -p "$KBIN"
# One build at a time: two would share the temporary directories and the CPU.
exec 9>"$KBIN/.build.lock"
flock 9
all=(kind kubernetes etcd coredns containerd runc crictl)
for what in "${@:-${all[@]}}"; do
	case $what in
	kind) step kind "$KIND_VERSION" build_kind ;;
	kubernetes) step kubernetes "$K8S_VERSION" build_kubernetes ;;
	etcd) step etcd "$ETCD_VERSION" build_etcd ;;
	coredns) step coredns "$COREDNS_VERSION" build_coredns ;;
	containerd) step containerd "$CONTAINERD_VERSION" build_containerd ;;
	runc) step runc "$RUNC_VERSION" build_runc ;;
	crictl) step crictl "$CRICTL_VERSION" build_crictl ;;
	*) die "unknown: $what (one of ${all[*]})" ;;
	esac
done
