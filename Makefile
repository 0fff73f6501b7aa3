# argocd-image-updater
SHELL := /bin/bash

BINARY   := bin/argocd-image-updater
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
GO       ?= go
# Test servers (etcd, kube-apiserver, registry) are built once per machine
# into this cache, outside the checkout.
TESTBIN  ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/argocd-image-updater/testbin
export TESTBIN

.PHONY: all build test unit lint bench bench-upstream soak testbin demo generate manifests clean

all: build

## build: compile the controller into bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BINARY) ./cmd/argocd-image-updater

## testbin: install the test servers and Debian packages the tests need
testbin:
	@hack/testbin.sh >/dev/null

## test: lint, then every test once, including those against real servers:
## the packages whose tests start no server under the race detector, the
## others without it (hack/test.sh); prints the elapsed time.
test: lint
	@hack/test.sh

## unit: the tests that need no test servers, under the race detector
unit:
	$(GO) test -count=1 -race -short ./...

## lint: gofmt, go vet, no build outputs or large files tracked, and the
## import rules of docs/design.md
lint:
	@hack/check-tracked.sh
	@out="$$(find . -name '*.go' -not -path './.git/*' -print0 | xargs -0 gofmt -l)"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -run '^TestImportRules' ./docs/

## bench: Go benchmarks, then the scale benchmark of the whole controller
## (test/bench/: real servers, 1,000, 5,000 and 20,000 Applications, and push
## notifications; about 17 minutes on 2 cores), which writes docs/benchmarks.md.
## BENCH_SCENARIOS=a,b,c,d adds 50,000 Applications (about 20 minutes more).
BENCH_SCENARIOS ?=
bench: build
	@set -o pipefail; out="$$(mktemp)"; trap 'rm -f "$$out"' EXIT; \
	assets="$$(hack/testbin.sh)" || exit 1; export KUBEBUILDER_ASSETS="$$assets"; \
	$(GO) test -run='^$$' -bench=. -benchmem ./... | tee "$$out"; gobench=$$?; \
	BENCH_BINARY="$(CURDIR)/$(BINARY)" $(GO) test -count=1 -run '^TestScale$$' -v -timeout 120m ./test/bench/ \
		-args -scale -scale.only "$(BENCH_SCENARIOS)" -scale.write "$(CURDIR)/docs/benchmarks.md" -scale.gobench "$$out" && \
	exit $$gobench

## bench-upstream: this controller and upstream's v1.3.0 side by side
## (test/bench/sidebyside_test.go): both `run --once` over the same annotated
## Applications, interleaved, BENCH_UPSTREAM_RUNS times each per size in
## BENCH_UPSTREAM_APPS; writes the section "Side by side with upstream v1.3.0"
## of docs/benchmarks.md. Upstream is built from its published sources by
## hack/upstream.sh, once per machine (optional: nothing else needs it).
BENCH_UPSTREAM_APPS ?= 500,5000
BENCH_UPSTREAM_RUNS ?= 2
bench-upstream: build
	assets="$$(hack/testbin.sh)" && upstream="$$(hack/upstream.sh)" && \
	BENCH_BINARY="$(CURDIR)/$(BINARY)" KUBEBUILDER_ASSETS="$$assets" $(GO) test -count=1 -run '^TestSideBySide$$' -v -timeout 120m ./test/bench/ \
		-args -sbs.upstream "$$upstream" -sbs.apps "$(BENCH_UPSTREAM_APPS)" -sbs.runs "$(BENCH_UPSTREAM_RUNS)" -sbs.write "$(CURDIR)/docs/benchmarks.md"

## soak: the long run of the robustness suite (test/robustness/: faults, kills and
## other writers against real servers; make test runs a short one); it logs
## its figures (docs/robustness.md). ROBUSTNESS_SEED=n replays a run's faults.
ROBUSTNESS_SEED ?= 0
soak:
	assets="$$(hack/testbin.sh)" && KUBEBUILDER_ASSETS="$$assets" $(GO) test -count=1 -run '^TestRobustness$$' -v -timeout 60m ./test/robustness/ \
		-args -robustness.long -robustness.seed $(ROBUSTNESS_SEED)

## demo: run the updater against a local API server, registry and git server
demo: build
	@assets="$$(hack/testbin.sh)" && KUBEBUILDER_ASSETS="$$assets" DEMO_BINARY=$(CURDIR)/$(BINARY) $(GO) test -count=1 -run '^TestDemo$$' -v ./test/demo/ \
		| grep -v -E '^(=== RUN|--- PASS|PASS$$|ok )'; exit $${PIPESTATUS[0]}

clean:
	rm -rf bin

## generate: the ImageUpdater CRD (manifests/base/crd, the chart's files/) and deep-copy
## functions from the Go types in api/ (a test fails when they are stale)
generate:
	$(GO) tool controller-gen object paths=./api/...
	$(GO) tool controller-gen crd paths=./api/... output:crd:artifacts:config=manifests/base/crd
	cp manifests/base/crd/*.yaml charts/argocd-image-updater/files/

## manifests: generate, then render manifests/install.yaml from the kustomize base
## with the kustomize that make testbin pins (the one Argo CD ships)
manifests: generate
	assets="$$(hack/testbin.sh)" && "$$assets/kustomize" build manifests/base > manifests/install.yaml
