# sbx build and tests. Building needs cgo and libseccomp (make deps);
# `make unit` runs the tests that need neither root nor the network, as any
# user; `make test` runs everything, as root. `make help` lists the targets.
GO       ?= go
BIN      := bin/sbx
TAGS     := seccomp netgo osusergo
COMMIT   := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -extldflags "-static" -X github.com/sbxrun/sbx/internal/version.Commit=$(COMMIT)
STATICCHECK_VERSION := v0.8.2
export CGO_ENABLED := 1
# make deps installs Go into /usr/local/go when the machine has none new enough.
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all help build helpers release-helpers deps deps-test deps-bench deps-openhands unit test test-python python-dist test-nomad test-kubernetes nomad k8s lint bench clean

all: build

## help: list the targets
help:
	@awk '/^## / { sub(/^## /, ""); if (match($$0, /^[a-z0-9-]+: /)) { name = substr($$0, 1, RLENGTH - 2); text = substr($$0, RLENGTH + 1) } else { text = "  " $$0; name = "" }; printf "  %-16s %s\n", name, text }' $(MAKEFILE_LIST)

## deps: install what make build needs: gcc, static libseccomp, git, and Go
## 1.25 or later (into /usr/local/go when missing); idempotent
deps:
	bash scripts/install-deps.sh

## deps-test: also the Debian packages the test suite runs (busybox-static,
## debootstrap, skopeo, umoci, nftables, python3...)
deps-test:
	bash scripts/install-deps.sh --test

## deps-bench: also the runtimes sbx bench compares against
deps-bench:
	bash scripts/install-deps.sh --bench

## helpers: the small sbx-init and sbx-executor that every program linking sbx embeds
helpers:
	$(GO) generate ./internal/helperbin

## release-helpers: on a release branch only, commit the helper binaries so that
## the tag's module carries them and `go get` of the release needs no step (main
## never commits them: they change with every executor change)
release-helpers: helpers
	git add -f internal/helperbin/bin/sbx-init internal/helperbin/bin/sbx-executor internal/helperbin/bin/sbx-lcinit

## build: a statically linked bin/sbx, and the plot helper of sbx bench
build: helpers
	$(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sbx
	$(GO) build -trimpath -tags '$(TAGS)' -ldflags '-s -w' -o bin/sbx-bench-plot ./bench/chart/cmd/sbx-bench-plot

$(BIN): build

## deps-openhands: the trees the OpenHands end-to-end tests run (Debian
## trixie with the Agent Server, the app server), built from Debian and PyPI
## and cached under $(SBX_TEST_CACHE) (several minutes the first time)
SBX_TEST_CACHE ?= /var/cache/sbx-test
deps-openhands:
	bash tests/openhands/build-image.sh $(SBX_TEST_CACHE) >/dev/null

## unit: the tests that need neither root nor the network, as any user
## (go test -short: tests that need root skip, see internal/roottest; the
## suites under tests/ are root-only and left out, not linked to skip)
unit: helpers
	$(GO) test -short -tags '$(TAGS)' $$($(GO) list ./... | grep -v '/tests/')

## test: the whole suite, as root, against the real kernel (builds and
## caches Nomad, the OpenHands trees and a Python venv on first use)
test: deps deps-test deps-openhands build
	$(GO) vet -tags '$(TAGS)' ./...
	SBX_BIN=$(abspath $(BIN)) $(GO) test -tags '$(TAGS)' -count=1 -timeout 25m -p 1 $$($(GO) list ./... | grep -v '/tests/openhands$$')
# OpenHands' clients, cold then on warm Agent Servers: dozens of Agent
# Server boots (a minute each on a loaded 2-CPU machine), a longer bound
	SBX_BIN=$(abspath $(BIN)) $(GO) test -tags '$(TAGS)' -count=1 -timeout 60m -p 1 ./tests/openhands/
	$(MAKE) --no-print-directory test-python
	$(MAKE) --no-print-directory test-nomad
	$(MAKE) --no-print-directory test-kubernetes

## test-python: the Python SDK's tests (pytest, against a real sbx serve), in the cached venv
test-python: $(BIN)
	cd sdk/python && SBX_BIN=$(abspath $(BIN)) "$$(bash ../../scripts/python-venv.sh)/bin/python" -m pytest -q tests

## python-dist: the Python SDK's wheel and source archive in sdk/python/dist, as
## uploaded to PyPI (twine upload sdk/python/dist/*), from the cached venv
python-dist:
	cd sdk/python && V="$$(bash ../../scripts/python-venv.sh)" && \
		"$$V/bin/python" -m pip wheel --quiet --no-deps --no-build-isolation -w dist . && \
		"$$V/bin/python" -c 'from setuptools import build_meta as b; print("dist/" + b.build_sdist("dist"))'

## nomad: build (once per machine, cached under /var/cache/sbx-test) the
## pinned Nomad agent the driver's end-to-end tests run, and print its path
nomad:
	@bash scripts/nomad-bin.sh

## k8s: build (once per machine, cached under /var/cache/sbx-test) the
## pinned Kubernetes programs, etcd and agent-sandbox's controller that the
## Kubernetes end-to-end tests run, and print their directory (cold: about
## 1,400 s of CPU, 15-20 minutes of an idle 2-CPU machine and an hour or more
## of a shared one: keep /var/cache/sbx-test between CI runs; docs/kubernetes.md)
k8s:
	@bash scripts/k8s-bin.sh

## test-kubernetes: sbx as a Kubernetes RuntimeClass end to end (etcd,
## kube-apiserver, kube-scheduler, a kubelet, containerd, agent-sandbox);
## SBX_K8S_BENCH=1 also measures pod and claim start-up
test-kubernetes: build
	SBX_K8S_BIN=$$(bash scripts/k8s-bin.sh) SBX_BIN=$(abspath $(BIN)) $(GO) test -tags '$(TAGS) kubernetes' \
		-count=1 -timeout 20m -v -run TestKubernetes ./tests/kubernetes/

## test-nomad: the Nomad driver's tests (its own module), including the
## end-to-end tests on a real Nomad cluster on loopback
test-nomad: build
	cd nomad-driver && $(GO) vet -tags '$(TAGS)' ./...
	cd nomad-driver && SBX_NOMAD_BIN=$$(bash ../scripts/nomad-bin.sh) SBX_BIN=$(abspath $(BIN)) \
		$(GO) test -tags '$(TAGS)' -count=1 -timeout 20m -p 1 ./...

## lint: gofmt, go vet and staticcheck
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1; }
	$(GO) vet -tags '$(TAGS)' ./...
	$(GO) vet -tags '$(TAGS) kubernetes' ./tests/kubernetes/
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags '$(TAGS)' ./...
	cd nomad-driver && $(GO) vet -tags '$(TAGS)' ./...
	cd nomad-driver && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags '$(TAGS)' ./...

## bench: go benchmarks of the hot paths (see BENCHMARKS.md for sbx bench)
bench: deps-bench build
	SBX_BIN=$(abspath $(BIN)) $(GO) test -tags '$(TAGS)' -run '^$$' -bench . -benchtime 50x ./tests/...

## clean: remove what make build made
clean:
	rm -rf bin internal/helperbin/bin/sbx-*
