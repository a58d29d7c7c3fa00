# syntax=docker/dockerfile:1
#
# herald's images: one static binary (`herald controller | speaker | status | version`),
# shipped in two final images because the two components need opposite things.
#
#   docker build --target controller -t herald-controller:dev --build-arg VERSION=$(git describe --tags --always --dirty) .
#   docker build --target speaker    -t herald-speaker:dev    --build-arg VERSION=$(git describe --tags --always --dirty) .
#
# controller: distroless static, non-root (65532). It needs nothing but the binary and CA
#   certificates: no shell, no package manager, nothing to exploit or patch.
# speaker: Debian slim with iptables, conntrack and nft, run as root with NET_RAW and
#   NET_ADMIN only (see config/speaker/daemonset.yaml). The proxier runs
#   iptables-restore, iptables-save, iptables (through coreos/go-iptables) and conntrack,
#   exactly as kube-proxy does; those are dynamically linked userland tools that a
#   distroless image does not have. Both backends (nft and legacy) are installed and
#   hack/image/iptables-wrapper picks the node's, as kube-proxy's image does. nft only
#   lists the node's nftables tables: kube-proxy's nftables mode shows itself by them.
# One image for both would have made the controller carry a shell and iptables for
# nothing; a single debian-slim image run as non-root for the controller was the other
# choice, rejected for that reason.

# The three bases, as build args so that a machine with no registry can name local
# stand-ins (hack/kind/herald-images.sh does); the defaults are what a normal build uses.
ARG GOLANG_IMAGE=golang:1.26
ARG SPEAKER_BASE=debian:bookworm-slim
ARG CONTROLLER_BASE=gcr.io/distroless/static-debian12:nonroot

# The build runs on the builder's platform and cross-compiles (no emulation needed for
# `docker buildx build --platform linux/amd64,linux/arm64`).
FROM --platform=$BUILDPLATFORM ${GOLANG_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
# Stamped into `herald version` and the logs; the Makefile passes `git describe`.
ARG VERSION=dev
# CGO_ENABLED=0: a static binary that runs on distroless static and on any libc.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
    -ldflags "-s -w -X herald.dev/herald/internal/version.Version=${VERSION}" \
    -o /out/herald ./cmd/herald
# Check the stamp, when the binary can run on the builder.
RUN if [ "$TARGETARCH" = "$(go env GOHOSTARCH)" ]; then /out/herald version; fi

# The speaker: root (uid 0), NET_RAW and NET_ADMIN are granted by the DaemonSet.
FROM ${SPEAKER_BASE} AS speaker
RUN apt-get update && \
    apt-get install -y --no-install-recommends iptables conntrack nftables && \
    rm -rf /var/lib/apt/lists/*
COPY --chmod=0755 hack/image/iptables-wrapper /usr/local/sbin/iptables-wrapper
RUN for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do \
      ln -s iptables-wrapper "/usr/local/sbin/$n"; \
    done
COPY --from=build /out/herald /herald
USER 0:0
ENTRYPOINT ["/herald"]
CMD ["speaker"]

# The controller, and the default target: non-root, nothing but the binary.
FROM ${CONTROLLER_BASE} AS controller
COPY --from=build /out/herald /herald
USER 65532:65532
ENTRYPOINT ["/herald"]
CMD ["controller"]
