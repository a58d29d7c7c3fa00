# herald: one static binary for every component (controller, speaker, status).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X herald.dev/herald/internal/version.Version=${VERSION}" \
    -o /out/herald .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/herald /herald
USER 65532:65532
ENTRYPOINT ["/herald"]
