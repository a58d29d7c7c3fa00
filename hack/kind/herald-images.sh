#!/usr/bin/env bash
# herald's two images, herald-controller:$TAG and herald-speaker:$TAG, from the repo's
# own Dockerfile on a machine with no registry. Its three bases are build args
# (GOLANG_IMAGE, SPEAKER_BASE, CONTROLLER_BASE); this names local stand-ins for them:
#   herald.local/debian:slim-*   debootstrap minbase: debian:bookworm-slim
#   herald.local/golang:<ver>    that plus this machine's Go toolchain and CA bundle
#   herald.local/static:*        users, CA bundle, /tmp: distroless static
# The speaker stage still runs apt-get (Debian's mirror is reachable) and the build
# stage `go mod download` (the Go module proxy is). Environment: TAG (dev, the tag of
# config/default), VERSION (git describe).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
TAG=${TAG:-dev}
VERSION=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}
docker info >/dev/null 2>&1 || die "docker does not answer: run hack/kind/setup-docker.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The Dockerfile needs BuildKit (RUN --mount, COPY --chmod). Docker 20.10's client has
# it built in; a newer client wants the buildx plugin.
bk=docker
if ! docker buildx version >/dev/null 2>&1; then
	[[ -x /usr/bin/docker ]] && /usr/bin/docker version -f '{{.Client.Version}}' 2>/dev/null | grep -q '^20\.' ||
		die "BuildKit is needed: install the buildx plugin, or Debian's docker.io client (/usr/bin/docker)"
	bk=/usr/bin/docker
fi

slim=$(debian slim)
static=$(static_base)
gover=$(go env GOVERSION)
golang="herald.local/golang:${gover#go}-$(cat /etc/ssl/certs/ca-certificates.crt | sha256sum | cut -c1-8)"
if ! have "$golang"; then
	log "$golang: $slim plus $(go env GOROOT)"
	mkdir -p "$tmp/golang"
	cp -a "$(go env GOROOT)" "$tmp/golang/go"
	cp /etc/ssl/certs/ca-certificates.crt "$tmp/golang/"
	cat >"$tmp/golang/Dockerfile" <<-DOCKERFILE
		FROM $slim
		COPY go /usr/local/go
		COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
		ENV GOPATH=/go GOTOOLCHAIN=local PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		WORKDIR /go
	DOCKERFILE
	DOCKER_BUILDKIT=0 docker build -q -t "$golang" "$tmp/golang" >/dev/null 2>"$tmp/golang.log" ||
		{ cat "$tmp/golang.log" >&2; die "docker build $golang failed"; }
fi

# BuildKit would fetch the frontend image that `# syntax=` names: build from a copy of
# the Dockerfile without that line (Docker 20.10's built-in frontend reads the rest).
sed '/^# syntax=/d' "$root/Dockerfile" >"$tmp/Dockerfile"

# BuildKit runs the Dockerfile's steps under dockerd, not under this script, so `nice`
# here would not reach the Go build inside: renice what runs in BuildKit's cgroups
# (/docker/buildkit/<step>) while the builds last. Children inherit it.
# A build step may exit between the check and the renice: that failure must neither end
# the loop (set -e holds in it too) nor, through the trap's kill of a loop already gone,
# turn this script's success into a silent failure.
renice_buildkit() {
	while sleep 1; do
		for p in $(grep -l '/docker/buildkit/' /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3); do
			if [[ $(awk '{print $19}' "/proc/$p/stat" 2>/dev/null) == 0 ]]; then
				renice -n 19 -p "$p" >/dev/null 2>&1 || true
			fi
		done
	done
}
renice_buildkit &
renicer=$!
trap 'kill "$renicer" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for target in controller speaker; do
	t1=$SECONDS
	DOCKER_BUILDKIT=1 heavy "$bk" build -q -f "$tmp/Dockerfile" --target "$target" \
		--build-arg VERSION="$VERSION" --build-arg GOLANG_IMAGE="$golang" \
		--build-arg SPEAKER_BASE="$slim" --build-arg CONTROLLER_BASE="$static" \
		-t "herald-$target:$TAG" "$root" >/dev/null 2>"$tmp/$target.log" ||
		{ tail -30 "$tmp/$target.log" >&2; die "docker build --target $target failed"; }
	log "built herald-$target:$TAG (version $VERSION): $((SECONDS - t1))s"
	echo "herald-$target:$TAG"
done
