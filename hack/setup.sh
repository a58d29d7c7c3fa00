#!/usr/bin/env bash
# Checks that this machine can run herald's lab, demo and tests, and installs the Debian
# packages they need. `make demo`, `make test` and .ci/run call it before anything long,
# so that a missing tool or a non-root user is reported in the first seconds, with what
# to do, rather than after a long build.
set -euo pipefail

# gcc and libc6-dev for `go test -race`; iproute2, iptables, arping and conntrack for the
# network-namespace lab; nftables (nft) for the speakers' handover forwarding and the
# proxier's test beside kube-proxy's nftables mode; prometheus for promtool (the
# dashboard and alert queries) and the lab's Prometheus; git and make for the build
# itself.
packages=(make git gcc libc6-dev ca-certificates iproute2 iptables nftables arping conntrack prometheus)
# The command each package brings, for machines without dpkg.
commands=(make git gcc "" "" ip iptables-restore nft arping conntrack promtool)
# `setup.sh kind` adds what the offline kind cluster is built with (hack/kind): jq for the
# scripts, debootstrap for the base images, libseccomp-dev and pkg-config for runc.
# Docker itself is installed and started by hack/kind/setup-docker.sh.
if [[ "${1:-}" == kind ]]; then
  packages+=(jq debootstrap libseccomp-dev pkg-config)
  commands+=(jq debootstrap "" pkg-config)
fi

fail() {
  echo "setup: $*" >&2
  exit 1
}

[[ "$(uname -s)" == Linux ]] || fail "herald's lab is made of Linux network namespaces; this machine runs $(uname -s)."
[[ "$(id -u)" == 0 ]] || fail "run as root (for example: sudo make demo). The lab creates network namespaces; nothing changes in this machine's own network."

command -v go >/dev/null || fail "Go 1.26 or newer is needed and 'go' is not on PATH: install it from https://go.dev/dl/ (or your distribution) and run again."
gov=$(go env GOVERSION)
if [[ ! "$gov" =~ ^go1\.([0-9]+) ]] || ((BASH_REMATCH[1] < 26)); then
  fail "Go 1.26 or newer is needed, 'go' is $gov: install a newer one from https://go.dev/dl/."
fi

missing=()
if command -v dpkg-query >/dev/null; then
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]} (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2 || fail "apt-get update failed: check the machine's package sources and network."
    apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
      fail "apt-get install ${missing[*]} failed."
  fi
else
  for i in "${!packages[@]}"; do
    c=${commands[$i]}
    [[ -z "$c" ]] || command -v "$c" >/dev/null || missing+=("${packages[$i]} (for $c)")
  done
  ((${#missing[@]} == 0)) || fail "this is not a Debian machine and these are missing: ${missing[*]}. Install them with the system's package manager and run again."
fi

# Network namespaces must work here (a container without CAP_SYS_ADMIN cannot make them).
probe="herald-setup-$$"
ip netns add "$probe" 2>/dev/null || fail "cannot create a network namespace ('ip netns add' failed): run on a machine or VM where root may, not in an unprivileged container."
ip netns delete "$probe"

root=$(cd "$(dirname "$0")/.." && pwd)
if ! compgen -G "$root/bin/k8s/*/.stamp" >/dev/null; then
  echo "setup: ok. First run: Go modules are downloaded and kube-apiserver, kube-controller-manager, kubectl and etcd are built from source into bin/k8s, about 10 to 25 minutes on 2 cores; later runs reuse them." >&2
fi
