#!/usr/bin/env bash
# Builds kind's node image with no registry: everything comes from Debian's packages
# (debootstrap) and from binaries built here (build-binaries.sh). Prints the image name.
#
#   herald.local/debian:<name>-<hash>        debootstrap rootfs, `docker import`ed
#   herald.local/kind-base:<hash>            kind's images/base: rootfs + kind's files
#                                            (from the kind module) + containerd, runc,
#                                            crictl, Debian's CNI plugins
#   registry.k8s.io/...                      the images kubeadm asks for (control plane,
#                                            kube-proxy, etcd, CoreDNS, pause), built
#                                            FROM local bases with the legacy builder
#   herald.local/kind-node:<k8s>-<hash>      the base plus kubeadm/kubelet/kubectl and all
#                                            those images preloaded (pinned) in containerd,
#                                            assembled as `kind build node-image` does
#
# Each image is skipped when present; <hash> covers this recipe and the versions, so
# changing either builds anew. FORCE=1 rebuilds the node image (not its inputs).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# The classic builder: with a local FROM it never looks at a registry.
export DOCKER_BUILDKIT=0

versions="$KIND_VERSION $K8S_VERSION $ETCD_VERSION $COREDNS_VERSION $PAUSE_VERSION $CONTAINERD_VERSION $RUNC_VERSION $CRICTL_VERSION $DEBIAN_SUITE"
# The recipe: this script and the lib.sh helpers it builds with.
hash=$( (echo "$versions"; declare -f debian static_base image; cat "$0") | sha256sum | cut -c1-12)
NODE_IMAGE=${NODE_IMAGE:-herald.local/kind-node:$K8S_VERSION-$hash}

if [[ -z ${FORCE:-} ]] && have "$NODE_IMAGE"; then
	log "$NODE_IMAGE: cached"
	echo "$NODE_IMAGE"
	exit 0
fi

command -v debootstrap >/dev/null || die "debootstrap is needed: apt-get install debootstrap"
docker info >/dev/null 2>&1 || die "docker does not answer: run hack/kind/setup-docker.sh"
"$root/hack/kind/build-binaries.sh"
bins() { echo "$KBIN/$1-$2"; }
kube=$(bins kubernetes "$K8S_VERSION")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

t0=$SECONDS
iptables=$(timed "rootfs iptables" debian iptables iptables conntrack nftables ca-certificates)
node=$(timed "rootfs node" debian node systemd conntrack iptables nftables iproute2 ethtool util-linux \
	mount kmod libseccomp2 pigz fuse-overlayfs e2fsprogs bash ca-certificates curl jq procps \
	containernetworking-plugins)
static=$(static_base)

# ------------------------------------------------------- the images kubeadm v1.36 wants
t1=$SECONDS
# kimage NAME:TAG FROM BODY FILE...: built as herald.local/<NAME>:<TAG>-<hash> (the
# cache key: a changed recipe builds anew), then tagged NAME:TAG, the name kubeadm uses.
kimage() {
	local ref=$1 local_
	shift
	local_="herald.local/${ref#registry.k8s.io/}-$hash"
	image "$local_" "$@"
	docker tag "$local_" "$ref"
}
for c in kube-apiserver kube-controller-manager kube-scheduler; do
	kimage "registry.k8s.io/$c:$K8S_VERSION" "$static" "COPY $c /usr/local/bin/$c" "$kube/$c"
done
# kube-proxy runs iptables, ip6tables, conntrack and nft (Debian's, nft backend as the
# node's kind entrypoint picks on this host).
kimage "registry.k8s.io/kube-proxy:$K8S_VERSION" "$iptables" "COPY kube-proxy /usr/local/bin/kube-proxy" "$kube/kube-proxy"
kimage "registry.k8s.io/etcd:${ETCD_VERSION#v}-0" "$static" "COPY etcd /usr/local/bin/etcd" "$(bins etcd "$ETCD_VERSION")/etcd"
# kubeadm's CoreDNS Deployment passes only args; it runs as root with NET_BIND_SERVICE.
kimage "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" "$static" 'COPY coredns /coredns
ENTRYPOINT ["/coredns"]' "$(bins coredns "$COREDNS_VERSION")/coredns"
kimage "registry.k8s.io/pause:$PAUSE_VERSION" scratch 'COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]' "$kube/pause"
images=(registry.k8s.io/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy}:"$K8S_VERSION"
	"registry.k8s.io/etcd:${ETCD_VERSION#v}-0" "registry.k8s.io/coredns/coredns:$COREDNS_VERSION"
	"registry.k8s.io/pause:$PAUSE_VERSION")
log "component images: $((SECONDS - t1))s"

# ----------------------------------------------------------- kind's base image, offline
# The same layout as kind's images/base Dockerfile, with our own binaries and Debian's
# CNI plugins (v1.1.1: ptp, host-local, portmap and loopback are all the static CNI uses).
base="herald.local/kind-base:$hash"
if ! have "$base"; then
	t1=$SECONDS
	kindsrc=$(cd "$tmp" && printf 'module x\n\ngo 1.26\n' >go.mod &&
		GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | jq -r .Dir)
	ctx="$tmp/base"
	mkdir -p "$ctx/bin"
	cp -r "$kindsrc/images/base/files" "$ctx/files"
	chmod -R u+w "$ctx/files"
	cp "$(bins containerd "$CONTAINERD_VERSION")"/* "$(bins crictl "$CRICTL_VERSION")/crictl" "$ctx/bin/"
	cp "$(bins runc "$RUNC_VERSION")/runc" "$ctx/runc"
	# containerd's default OCI spec with kind's createContainer hook and no rlimits.
	"$ctx/bin/ctr" oci spec |
		jq '.hooks.createContainer += [{"path": "/kind/bin/mount-product-files.sh"}] | del(.process.rlimits)' >"$ctx/cri-base.json"
	cat >"$ctx/Dockerfile" <<-DOCKERFILE
		FROM $node
		COPY files/ /
		COPY bin/ /usr/local/bin/
		COPY runc /usr/local/sbin/runc
		COPY cri-base.json /etc/containerd/cri-base.json
		RUN chmod 0755 /usr/local/bin/* /usr/local/sbin/runc /kind /kind/bin /kind/bin/* && \\
		    mkdir -p /opt/cni/bin /etc/kubernetes/manifests && \\
		    for p in host-local loopback ptp portmap; do ln -s /usr/lib/cni/\$p /opt/cni/bin/\$p; done && \\
		    rm -f /lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service \\
		          /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
		          /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
		          /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* && \\
		    echo ReadKMsg=no >>/etc/systemd/journald.conf && \\
		    ln -sf /usr/lib/systemd/systemd /sbin/init && \\
		    systemctl enable kubelet.service containerd.service undo-mount-hacks.service && \\
		    systemctl mask systemd-binfmt.service && \\
		    containerd --version && runc --version
		ENV container=docker
		STOPSIGNAL SIGRTMIN+3
		ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
	DOCKERFILE
	docker build -q -t "$base" "$ctx" >/dev/null 2>"$tmp/base.log" || { cat "$tmp/base.log" >&2; die "docker build $base failed"; }
	log "built $base: $((SECONDS - t1))s"
fi

# ------------------------------------------------- the node image, as kind assembles it
t1=$SECONDS
cid=$(docker run -d --entrypoint=sleep --security-opt seccomp=unconfined "$base" infinity)
trap 'docker rm -f -v "$cid" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
x() { docker exec --privileged -i "$cid" "$@"; }
for b in kubeadm kubelet kubectl; do docker cp "$kube/$b" "$cid:/usr/bin/$b"; done
x sh -c "chmod 0755 /usr/bin/kubeadm /usr/bin/kubelet /usr/bin/kubectl && echo $K8S_VERSION >/kind/version"
# Check that kubeadm asks for exactly the images built above.
want=$(x kubeadm config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null | grep -v pause | sort)
have_=$(printf '%s\n' "${images[@]}" | grep -v pause | sort)
[[ $want == "$have_" ]] || die "kubeadm $K8S_VERSION wants: $(echo $want); built: $(echo $have_)"
x bash -c 'nohup containerd >/tmp/containerd.log 2>&1 &'
for _ in $(seq 30); do x ctr version >/dev/null 2>&1 && break; sleep 1; done
docker save "${images[@]}" | x ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
	--all-platforms --no-unpack --digests - >/dev/null
x ctr --namespace=k8s.io images list -q | grep -v '^sha256:' >&2
x sh -c 'kill $(pidof containerd); while pidof containerd >/dev/null; do sleep 0.2; done; rm -f /tmp/containerd.log'
docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "$cid" "$NODE_IMAGE" >/dev/null
log "node image assembled: $((SECONDS - t1))s (all of node-image.sh: $((SECONDS - t0))s)"

# Each recipe change leaves a 1.2 GB node image behind: keep only this recipe's node,
# base and component images (a running cluster keeps the layers it uses).
for repo in herald.local/kind-node herald.local/kind-base herald.local/kube-apiserver herald.local/kube-controller-manager \
	herald.local/kube-scheduler herald.local/kube-proxy herald.local/etcd herald.local/coredns/coredns herald.local/pause; do
	docker images --format '{{.Repository}}:{{.Tag}}' "$repo" | grep -v -e "$hash\$" -e "^$NODE_IMAGE\$" |
		xargs -r docker rmi >/dev/null 2>&1 || true
done
echo "$NODE_IMAGE"
