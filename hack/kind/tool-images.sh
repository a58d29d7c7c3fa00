#!/usr/bin/env bash
# The small images the walkthrough pulls from Docker Hub, made here. Prints each name.
#   netshoot  herald.local/netshoot:<hash>: stand-in for nicolaka/netshoot (the LAN
#             client `mypc`, and the smoke test's pods): curl, ip, arping, ping,
#             ndisc6, dig, tcpdump, busybox (httpd, nc).
#   whoami    herald.local/whoami:<hash>: stand-in for traefik/whoami (the webpods),
#             built from hack/kind/whoami (its own module) on the static base.
# Usage: tool-images.sh [netshoot] [whoami]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
docker info >/dev/null 2>&1 || die "docker does not answer: run hack/kind/setup-docker.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

whats=("$@")
((${#whats[@]})) || whats=(netshoot whoami)
for what in "${whats[@]}"; do
	case $what in
	netshoot)
		tag=$(debian netshoot curl iproute2 arping iputils-ping ndisc6 dnsutils tcpdump busybox ca-certificates procps)
		# The tag names the image by the hash of its package list (debian() in lib.sh).
		netshoot="herald.local/netshoot:$DEBIAN_SUITE-${tag##*-}"
		have "$netshoot" || docker tag "$tag" "$netshoot"
		echo "$netshoot"
		;;
	whoami)
		src="$root/hack/kind/whoami"
		tag="herald.local/whoami:$(cat "$src"/go.mod "$src"/*.go | sha256sum | cut -c1-12)"
		if ! have "$tag"; then
			(cd "$src" && CGO_ENABLED=0 heavy go build -trimpath -ldflags '-s -w' -o "$tmp/whoami" .)
			image "$tag" "$(static_base)" 'COPY whoami /whoami
ENTRYPOINT ["/whoami"]' "$tmp/whoami"
		fi
		echo "$tag"
		;;
	*) die "unknown image: $what" ;;
	esac
done
