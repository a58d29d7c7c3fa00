# Sourced by hack/kind/*.sh: the pinned versions and the few helpers they share.
# Every artefact is cached by version: Go binaries under bin/kind/<what>-<version>/
# (bin/ is gitignored), images in Docker's image store under herald.local/*.
# shellcheck disable=SC2034 # the variables are for the scripts that source this

KIND_VERSION=${KIND_VERSION:-v0.33.0}
K8S_VERSION=${K8S_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.8}          # kubeadm v1.36 asks for registry.k8s.io/etcd:3.6.8-0
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.2}   # kubeadm v1.36's CoreDNS
PAUSE_VERSION=${PAUSE_VERSION:-3.10}          # the sandbox image of kind's containerd config
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.3.4}
RUNC_VERSION=${RUNC_VERSION:-v1.4.3}
CRICTL_VERSION=${CRICTL_VERSION:-v1.36.0}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CLUSTER=${CLUSTER:-herald-kind}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KBIN="$root/bin/kind"
KIND="$KBIN/kind-$KIND_VERSION/kind"

log() { printf '%s %s: %s\n' "$(date +%T)" "$(basename "$0" .sh)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# timed LABEL CMD...: runs CMD and logs how long it took (the cold/warm numbers).
timed() {
	local label=$1 t0=$SECONDS
	shift
	"$@" || return # and not only under set -e: a caller may test the status
	log "$label: $((SECONDS - t0))s"
}

# Heavy work yields to everything else on a small machine.
heavy() { nice -n 19 "$@"; }

# Whether this kernel's capability bounding set lacks CAP_SYS_RESOURCE (bit 24), as some
# VM sandboxes' do: Docker's --privileged then needs a runc wrapper (setup-docker.sh) and
# containerd in the nodes must not ask for negative OOM score adjustments (up.sh).
lacks_sys_resource() { (((0x$(awk '/^CapBnd/ {print $2}' /proc/self/status) >> 24 & 1) == 0)); }

have() { docker image inspect "$1" >/dev/null 2>&1; }

# debian NAME PACKAGES...: a debootstrap minbase rootfs with PACKAGES as an image.
debian() {
	local name=$1
	shift
	local pkgs tag
	pkgs=$(IFS=,; echo "$*")
	tag="herald.local/debian:$name-$DEBIAN_SUITE-$(echo "$DEBIAN_MIRROR $pkgs" | sha256sum | cut -c1-8)"
	if ! have "$tag"; then
		local dir="${tmp:?}/rootfs-$name"
		log "debootstrap $DEBIAN_SUITE ($name): $*"
		heavy debootstrap --variant=minbase ${pkgs:+--include="$pkgs"} "$DEBIAN_SUITE" "$dir" "$DEBIAN_MIRROR" >"${tmp:?}/debootstrap-$name.log" 2>&1 ||
			{ tail -20 "${tmp:?}/debootstrap-$name.log" >&2; die "debootstrap $name failed"; }
		# What the slim images drop: package lists and caches, docs.
		rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/* "$dir"/usr/share/{doc,man,info}/* "$dir"/var/log/*.log
		tar -C "$dir" -c . | docker import \
			--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			--change 'CMD ["bash"]' - "$tag" >/dev/null
		rm -rf "$dir"
	fi
	echo "$tag"
}

KUBECTL=${KUBECTL:-$KBIN/kubernetes-$K8S_VERSION/kubectl}
POD_SUBNET=10.10.0.0/16       # the walkthrough's, and config/kind's --cluster-cidr
SERVICE_SUBNET=10.200.1.0/24  # the walkthrough's
NETWORK=kind
NETWORK_V4=${NETWORK_V4:-172.18.0.0/16}             # the walkthrough's range
NETWORK_V6=${NETWORK_V6:-fc00:f853:ccd:e793::/64}   # kind's own

# static: the stand-in for distroless static: users, CA certificates, /tmp, no shell.
static_base() {
	local tag dir="${tmp:?}/static"
	# The host's CA bundle, so that HTTPS works wherever the host's does.
	tag="herald.local/static:$(cat /etc/ssl/certs/ca-certificates.crt "${BASH_SOURCE[0]}" | sha256sum | cut -c1-8)"
	if ! have "$tag"; then
		mkdir -p "$dir/etc/ssl/certs" "$dir/tmp" "$dir/home/nonroot"
		chmod 1777 "$dir/tmp"
		printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$dir/etc/passwd"
		printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$dir/etc/group"
		echo 'hosts: files dns' >"$dir/etc/nsswitch.conf"
		cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/"
		tar -C "$dir" -c . | docker import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' - "$tag" >/dev/null
	fi
	echo "$tag"
}

# image TAG FROM DOCKERFILE-BODY FILE...: docker build of FILEs (copied into a fresh
# context) into TAG, skipped when TAG exists. The tags carry the version.
image() {
	local tag=$1 from=$2 body=$3
	shift 3
	have "$tag" && return 0
	local ctx="${tmp:?}/ctx-${tag//[^a-z0-9]/_}"
	mkdir -p "$ctx"
	cp "$@" "$ctx/"
	printf 'FROM %s\n%s\n' "$from" "$body" >"$ctx/Dockerfile"
	DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >/dev/null 2>"$ctx.log" ||
		{ cat "$ctx.log" >&2; die "docker build $tag failed"; }
	log "built $tag"
}
