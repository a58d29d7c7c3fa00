# herald — `make demo` shows it working, `make test` runs every test.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN              := $(CURDIR)/bin
CONTROLLER_TOOLS := v0.23.0
CONTROLLER_GEN   := $(BIN)/controller-gen-$(CONTROLLER_TOOLS)
VERSION          ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS          := -X herald.dev/herald/internal/version.Version=$(VERSION)
GO_PACKAGES      := ./...

.PHONY: all
all: build

##@ Generated files

$(CONTROLLER_GEN):
	mkdir -p $(BIN)
	GOBIN=$(BIN)/.cg GOFLAGS=-mod=mod go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS)
	mv $(BIN)/.cg/controller-gen $@ && rmdir $(BIN)/.cg

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Write deepcopy functions of api/.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Write CRDs (config/crd/bases) and RBAC (config/rbac) from markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=herald-controller paths=./controllers/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=herald-speaker paths=./speaker/... output:rbac:artifacts:config=config/rbac/speaker
	@# The Helm chart renders copies of the CRDs and of the alert rules (charts/herald/files).
	rm -f charts/herald/files/crds/*.yaml && cp config/crd/bases/*.yaml charts/herald/files/crds/
	cp config/prometheus/rules.yaml charts/herald/files/prometheus/rules.yaml

GENERATED = api/v1beta1/zz_generated.deepcopy.go config/crd/bases/*.yaml config/rbac/role.yaml config/rbac/speaker/role.yaml \
            charts/herald/files/crds/*.yaml charts/herald/files/prometheus/rules.yaml docs/flags.md

.PHONY: docs
docs: ## Write docs/flags.md from the flags of cmd/herald's commands (hack/flagsdoc).
	go run ./hack/flagsdoc docs/flags.md

DASHBOARD = config/grafana/herald-dashboard.json

.PHONY: dashboard
dashboard: ## Write the Grafana dashboard ($(DASHBOARD)) from its code in hack/dashboard (its own module).
	go -C hack/dashboard run . -o $(CURDIR)/$(DASHBOARD)

.PHONY: verify-dashboard
verify-dashboard: ## Fail when $(DASHBOARD) differs from what hack/dashboard generates (after the generator's own tests).
	@go -C hack/dashboard test ./...
	@go -C hack/dashboard run . -check -o $(CURDIR)/$(DASHBOARD)

.PHONY: verify-generated
verify-generated: $(CONTROLLER_GEN) verify-dashboard ## Fail when the generated files differ from what the markers, hack/flagsdoc and hack/dashboard produce.
	@before=$$(cat $(GENERATED) | sha256sum); \
	$(MAKE) --no-print-directory generate manifests docs >/dev/null; \
	after=$$(cat $(GENERATED) | sha256sum); \
	if [ "$$before" != "$$after" ]; then \
	  echo "generated files were stale (now regenerated): commit the result of 'make generate manifests docs'"; \
	  git --no-pager diff --stat -- api config charts docs; exit 1; fi

RENDERED = config/manifests/herald.yaml

.PHONY: render
render: test-binaries ## Render config/default into config/manifests/herald.yaml, the all-in-one manifest.
	@kubectl=$$(hack/setup-test-binaries.sh)/kubectl; tmp=$$(mktemp); \
	{ echo "# herald, all in one: rendered from config/default by 'make render'. Do not edit."; \
	  echo "# Install: kubectl apply --server-side -f $(RENDERED)"; \
	  $$kubectl kustomize config/default; } >$$tmp && chmod 0644 $$tmp && mv $$tmp $(RENDERED) || { rm -f $$tmp; exit 1; }

.PHONY: verify-rendered
verify-rendered: test-binaries ## Fail when config/manifests/herald.yaml differs from what config/default renders.
	@before=$$(cat $(RENDERED) 2>/dev/null | sha256sum); \
	$(MAKE) --no-print-directory render >/dev/null; \
	after=$$(sha256sum <$(RENDERED)); \
	if [ "$$before" != "$$after" ]; then \
	  echo "$(RENDERED) was stale (now rendered again): commit the result of 'make manifests render'"; \
	  git --no-pager diff --stat -- $(RENDERED); exit 1; fi

##@ Build

.PHONY: build
build: ## Build bin/herald.
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(BIN)/herald ./cmd/herald

IMAGE_TAG ?= dev

.PHONY: images
images: ## Build the images herald-controller:$(IMAGE_TAG) and herald-speaker:$(IMAGE_TAG) (needs Docker).
	for t in controller speaker; do docker build --target $$t --build-arg VERSION=$(VERSION) -t herald-$$t:$(IMAGE_TAG) .; done

.PHONY: setup
setup: ## Check this machine (root, Linux, Go 1.26) and install the Debian packages the lab and tests need.
	@hack/setup.sh

.PHONY: test-binaries
test-binaries: ## Build kube-apiserver, kube-controller-manager, kubectl and etcd into bin/k8s.
	hack/setup-test-binaries.sh >/dev/null

.PHONY: helm
helm: ## Build the helm CLI into bin/helm (hack/setup-helm.sh), which the chart tests run.
	hack/setup-helm.sh >/dev/null

##@ Test

.PHONY: fmt-check
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

.PHONY: vet
vet:
	go vet $(GO_PACKAGES)
	go -C hack/dashboard vet ./...

.PHONY: verify-tracked-sizes
verify-tracked-sizes: ## Fail when git tracks a file over 1 MiB (a built binary, a capture).
	@hack/verify-tracked-sizes.sh

# KIND_SUITE=0 leaves the kind suite out of `make test` (say, on a machine where Docker cannot
# run); it is in by default, and fails rather than skips when it cannot run.
KIND_SUITE ?= 1

.PHONY: test
test: ## Every test: the checks, unit, envtest (real kube-apiserver + etcd), Helm chart, lab e2e, kube-proxy oracle, then the kind suite (make test-kind; KIND_SUITE=0 leaves it out); prints the time of each part (hack/test.sh).
	@KIND_SUITE=$(KIND_SUITE) GO_PACKAGES='$(GO_PACKAGES)' hack/test.sh

.PHONY: test-oracle
test-oracle: ## herald's iptables and nftables rules against kube-proxy v1.36.3 run as a library (hack/kporacle, its own module).
	cd hack/kporacle && go vet ./... && go test -count=1 ./...

.PHONY: fuzz
fuzz: ## Every Go fuzz target for FUZZTIME each (default 30s; FUZZ=pattern picks targets). make test runs their seeds and committed corpora.
	hack/fuzz.sh

.PHONY: bench
bench: setup test-binaries ## Benchmarks (numbers, no assertions); writes bench.txt.
	KUBEBUILDER_ASSETS=$$(hack/setup-test-binaries.sh) go test -run '^$$' -bench . -benchmem -count=1 $(GO_PACKAGES) | tee bench.txt

.PHONY: bench-proxy
bench-proxy: setup ## Proxier syncs at 1,000 and 10,000 Services, herald (nftables, iptables legacy and nft) then kube-proxy's nftables mode, 3 runs each (root, ~25 min); writes bench-proxy.txt.
	go test -count=3 -run '^$$' -bench 'BenchmarkSync(Full|OneEndpointChanged)|BenchmarkProxierMemory' -benchtime=3x -benchmem ./proxy/ | tee bench-proxy.txt
	cd hack/kporacle && go test -count=3 -run '^$$' -bench BenchmarkKubeProxyNFTables -benchtime=1x -timeout 60m ./nftoracle/ | tee -a ../../bench-proxy.txt

.PHONY: bench-scale
bench-scale: test-binaries ## Speakers at scale: 100, 300, 1,000 simulated nodes, 10,000 VIPs, a real API server (HERALD_SCALE_NODES to choose one; many minutes a size, docs/scale.md); writes bench-scale.txt, prints the table.
	HERALD_BENCH_SCALE=1 KUBEBUILDER_ASSETS=$$(hack/setup-test-binaries.sh) go test -run '^$$' -bench BenchmarkSpeakersAtScale -benchtime 1x -timeout 0 -v ./speaker/scale/ 2>&1 | tee bench-scale.txt
	@sed -n '/^Speakers at scale/,/^$$/p' bench-scale.txt

##@ Demo

.PHONY: demo
demo: setup test-binaries ## The walkthrough in the network-namespace lab (root): VIPs, owners, curls, failover. Leaves the lab running. DUAL_STACK=1: a dual-stack lab, and a dual-stack Service at the end. PROXY=nftables: the proxier in nftables mode.
	hack/demo.sh

.PHONY: kind-demo
kind-demo: ## The walkthrough on a real kind cluster, with a failover: kind's own images where Docker Hub answers (needs Docker and kind), else everything built here as kind-demo-offline does (OFFLINE=yes|no|auto). See hack/kind-demo.sh.
	hack/kind-demo.sh

.PHONY: demo-down
demo-down: ## Remove the lab `make demo` left running.
	hack/demo.sh down

##@ kind, offline (hack/kind: everything built here from Debian packages and the Go module proxy)

.PHONY: kind-check
kind-check: ## Say in seconds what the offline kind cluster has and lacks on this machine.
	@hack/kind/check.sh

.PHONY: kind-docker
kind-docker: ## Install docker.io if missing, start dockerd (with the CAP_SYS_RESOURCE runc wrapper where the kernel needs it).
	hack/kind/setup-docker.sh

.PHONY: kind-images
kind-images: kind-docker ## Build the kind CLI, the binaries and the offline node image herald.local/kind-node (cached by version).
	hack/kind/node-image.sh >/dev/null
	hack/kind/tool-images.sh >/dev/null

.PHONY: kind-up
kind-up: kind-images ## A walkthrough-shaped kind cluster herald-kind (1+3 nodes, static CNI, kube-proxy) and its smoke test.
	hack/kind/up.sh

.PHONY: kind-demo-offline
kind-demo-offline: kind-images ## hack/kind-demo.sh on the offline cluster (kubeProxyMode none), herald's images from hack/kind/herald-images.sh.
	hack/kind/demo.sh

.PHONY: test-kind
test-kind: ## The e2e suite on the kind cluster (test/kind): prepares Docker, images, cluster (kubeProxyMode none), then runs it. RUN=pattern picks tests.
	hack/kind/test.sh

.PHONY: kind-down
kind-down: ## Delete the kind cluster of kind-up or kind-demo-offline (the images stay cached).
	hack/kind/down.sh
