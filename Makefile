# Makefile for the retention service. `make` (or `make help`) lists the
# targets; each target's `## text` is its help line.
#
# Tools the build needs besides Go live in .tools/ (ignored by git) at pinned
# versions, so every machine and CI run the same ones without installing
# anything system-wide.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

GO ?= go
# PKG and TESTFLAGS narrow or tune `make test`, e.g.
#   make test PKG=./retention/ TESTFLAGS='-run TestParse -v'
PKG ?= ./...
TESTFLAGS ?=
# go test's own limit per package binary: its default, 10 minutes, is a bound on machine speed, and on 2 cores under
# a load of 40 (other builds and a CPU hog) cmd/retentionctl and httpapi took just over it and were killed. A hang
# still ends the run. A -timeout in TESTFLAGS overrides it.
TEST_TIMEOUT ?= 45m

TOOLS := $(CURDIR)/.tools

# The version and revision stamped into the binaries (`retentionctl version`), here and, through build arguments, in
# the image (make image).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.revision=$(REVISION)

# gotestsum (a tool dependency in go.mod) prints a line per package as it finishes, where plain `go test` is silent
# until the end; with -v in TESTFLAGS, every test's output as it comes. Its last lines are its summary ("DONE 1234
# tests in 300s"), and it exits non-zero when a test fails.
GOTESTSUM_FORMAT ?= $(if $(filter -v,$(TESTFLAGS)),standard-verbose,pkgname)
GOTEST := $(GO) tool gotestsum --format $(GOTESTSUM_FORMAT) --

# newman runs the Postman collections in the API tests; tests find it
# through $NEWMAN. Bump the pin deliberately: `npm view newman version`.
NEWMAN_VERSION := 6.2.2
NEWMAN := $(TOOLS)/node/node_modules/.bin/newman

# axe-core checks the web console's accessibility in its browser tests (console/); tests find it through $AXE_CORE.
# Bump the pin deliberately: `npm view axe-core version`.
AXE_CORE_VERSION := 4.14.1
AXE_CORE := $(TOOLS)/node/node_modules/axe-core/axe.min.js

# The console's browser tests drive Debian's Chromium (tests find it through $CHROMIUM). Only a run that includes
# package console needs it and axe-core, so `make test PKG=./postgres/` works on a machine without them.
CHROMIUM ?= /usr/bin/chromium
BROWSER_TOOLS := $(if $(filter ./... ./console/ ./console ./console/...,$(PKG)),tools-chromium tools-axe)

# The cells' tests (internal/cells, the ones with two cells behind the proxy in cmd/, the benchmark's smoke run of its
# routing cost in internal/bench) run Debian's HAProxy, as
# deploy/cells/haproxy.cfg configures it; tests find it through $HAPROXY. A run without those packages does not need it.
HAPROXY ?= /usr/sbin/haproxy
PROXY_TOOLS := $(if $(filter ./... ./internal/cells/ ./internal/cells ./internal/bench/ ./internal/bench ./cmd/%,$(PKG)),tools-haproxy)
# promtool (Debian's prometheus package ships it) checks the README's alerting rule against the series of /metrics
# (cmd/retentiond, TestReadmeAlertRulePassesPromtool); tests find it through $PROMTOOL. Only a run that includes that
# package needs it.
PROMTOOL ?= /usr/bin/promtool
PROM_TOOLS := $(if $(filter ./... ./cmd/... ./cmd/retentiond/ ./cmd/retentiond ./cmd/retentiond/...,$(PKG)),tools-promtool)

GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(TOOLS)/bin/golangci-lint

.PHONY: help run run-cells stop build image test proptest tools-newman tools-axe tools-chromium tools-haproxy tools-promtool tools-golangci-lint lint fmt vet tidy fuzz bench bench-smoke clean

help: ## show this list of targets
	@echo 'usage: make TARGET [PKG=./...] [TESTFLAGS=...]'
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z0-9_.-]+:.*## / { printf "  %-20s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

# Built first and then run, so that Ctrl-C reaches retentiond itself and it stops its PostgreSQL cleanly.
run: ## run retentiond locally with demo data (starts a private PostgreSQL unless DATABASE_URL is set)
	@echo "make run: building bin/retentiond and bin/retentionctl (the first build compiles every dependency: 2-3 minutes; later ones take seconds)"
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/retentiond ./cmd/retentionctl
	./bin/retentiond --dev

# Two cells behind HAProxy (README, "Past one Postgres"): runcells starts each cell's PostgreSQL and retentiond, then
# the proxy, and Ctrl-C stops them all. Built first and then run, as make run does.
run-cells: tools-haproxy ## run two cells of retentiond, each on its own private PostgreSQL with its demo org, behind HAProxy
	@echo "make run-cells: building bin/retentiond, bin/retentionctl and bin/runcells"
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/retentiond ./cmd/retentionctl ./internal/tools/runcells
	HAPROXY=$(HAPROXY) ./bin/runcells

# For a PostgreSQL that a killed retentiond left running (a `make run` takes it over as well). It refuses while the
# retentiond that started it still runs: Ctrl-C on that one stops both.
stop: ## stop the PostgreSQL of `make run` that a killed retentiond left running
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/retentionctl
	./bin/retentionctl dev stop

build: ## build the binaries into bin/
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

# docker-compose.yml uses this image (retention-local:dev), so `make image && docker compose up -d` runs binaries
# that know their revision; `docker compose up --build` builds it too, stamped only if VERSION and REVISION are set.
image: ## build the Docker image retention-local:dev, stamped with the version and revision
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t retention-local:dev .

# Without TEST_DATABASE_URL the tests get a throwaway PostgreSQL cluster from
# pgrun, started before and removed after `go test`; with it they use that
# database as is.
test: tools-newman $(BROWSER_TOOLS) $(PROXY_TOOLS) $(PROM_TOOLS) ## run the tests with the race detector (throwaway PostgreSQL unless TEST_DATABASE_URL is set)
	@echo "make test: compiling with -race, then one line per package as it finishes (all of them: about 6 minutes on 2 cores; a first run compiles for a few minutes more)"
ifeq ($(strip $(TEST_DATABASE_URL)),)
	NEWMAN=$(NEWMAN) AXE_CORE=$(AXE_CORE) CHROMIUM=$(CHROMIUM) HAPROXY=$(HAPROXY) PROMTOOL=$(PROMTOOL) $(GO) run ./internal/tools/pgrun -- $(GOTEST) -race -count=1 -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(PKG)
else
	NEWMAN=$(NEWMAN) AXE_CORE=$(AXE_CORE) CHROMIUM=$(CHROMIUM) HAPROXY=$(HAPROXY) PROMTOOL=$(PROMTOOL) $(GOTEST) -race -count=1 -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(PKG)
endif

# The expiry rule's property test (postgres/expiry_test.go) on 1,000 generated scenarios, where make test plays 50;
# its last line is the summary (scenarios, rows, time, failures). PROPTEST_SEED=n plays scenario n alone.
proptest: ## run the expiry rule's property test on 1,000 generated scenarios (make test runs 50)
	PROPTEST_N=$${PROPTEST_N:-1000} $(MAKE) test PKG=./postgres/ TESTFLAGS='-run TestExpiryScenarios -timeout 2h -v' 2>&1 | { grep -E 'expiry property test|--- FAIL|failed;|Error:|Messages:|^DONE' || true; }

# Installs only when newman is missing or not the pinned version, so repeated
# `make test` runs do not touch the network.
tools-newman: ## install the pinned newman (Postman CLI, for the API tests) into .tools/node
	@installed=$$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' $(TOOLS)/node/node_modules/newman/package.json 2>/dev/null | head -n1 || true); \
	if [ ! -x "$(NEWMAN)" ] || [ "$$installed" != "$(NEWMAN_VERSION)" ]; then \
		echo "installing newman@$(NEWMAN_VERSION) into $(TOOLS)/node"; \
		mkdir -p $(TOOLS)/node; \
		npm install --prefix $(TOOLS)/node --no-audit --no-fund --no-update-notifier --loglevel=error newman@$(NEWMAN_VERSION); \
	fi

tools-axe: ## install the pinned axe-core (accessibility checks of the console's browser tests) into .tools/node
	@installed=$$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' $(TOOLS)/node/node_modules/axe-core/package.json 2>/dev/null | head -n1 || true); \
	if [ ! -f "$(AXE_CORE)" ] || [ "$$installed" != "$(AXE_CORE_VERSION)" ]; then \
		echo "installing axe-core@$(AXE_CORE_VERSION) into $(TOOLS)/node"; \
		mkdir -p $(TOOLS)/node; \
		npm install --prefix $(TOOLS)/node --no-audit --no-fund --no-update-notifier --loglevel=error axe-core@$(AXE_CORE_VERSION); \
	fi

# Debian's packages, as root (CI runs as root); anyone else is told the command, and the tests are not run: a
# browser test skipped for want of a browser would pass for one that ran.
tools-chromium: ## install Debian's chromium and chromium-driver for the console's browser tests (as root)
	@if [ ! -x "$(CHROMIUM)" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing chromium and chromium-driver (apt-get)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
		else \
			echo "the console's browser tests need Chromium: run  sudo apt-get install -y chromium chromium-driver  (or set CHROMIUM=/path/to/chromium)" >&2; \
			exit 1; \
		fi; \
	fi

# HAProxy routes requests to cells (deploy/cells, make run-cells, the cells' tests): Debian's package, as root, as
# tools-chromium installs Chromium.
tools-haproxy: ## install Debian's haproxy for the cells' proxy, its tests and make run-cells (as root)
	@if [ ! -x "$(HAPROXY)" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing haproxy (apt-get)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null; \
		else \
			echo "the cells' proxy needs HAProxy: run  sudo apt-get install -y haproxy  (or set HAPROXY=/path/to/haproxy)" >&2; \
			exit 1; \
		fi; \
	fi

# Debian's prometheus package, as root, without its recommends (only its promtool is used; nothing starts the
# server); anyone else is told the command.
tools-promtool: ## install Debian's prometheus package for its promtool, which checks the README's alerting rule (as root)
	@if [ ! -x "$(PROMTOOL)" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing prometheus for its promtool (apt-get)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
		else \
			echo "the README's alerting rule is checked with promtool: run  sudo apt-get install -y --no-install-recommends prometheus  (or set PROMTOOL=/path/to/promtool)" >&2; \
			exit 1; \
		fi; \
	fi

tools-golangci-lint: ## install the pinned golangci-lint into .tools/bin
	@if ! "$(GOLANGCI_LINT)" version 2>/dev/null | grep -q "version $(GOLANGCI_LINT_VERSION:v%=%) "; then \
		echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into $(TOOLS)/bin"; \
		GOBIN=$(TOOLS)/bin $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); \
	fi

# CI (.ci/run) runs it before the tests: any finding fails the build, the layering rules (depguard in .golangci.yml)
# included. A cold install compiles golangci-lint from the Go module proxy: several minutes on 2 cores, once a machine.
lint: tools-golangci-lint ## run golangci-lint (config: .golangci.yml)
	$(GOLANGCI_LINT) run $(PKG)

fmt: ## format the Go code (gofmt -s)
	gofmt -s -w $$($(GO) list -f '{{.Dir}}' ./...)

vet: ## run go vet
	$(GO) vet $(PKG)

tidy: ## tidy go.mod and go.sum
	$(GO) mod tidy

fuzz: ## fuzz the retention period parser for 30s
	$(GO) test -run='^$$' -fuzz=FuzzParsePeriod -fuzztime=30s ./retention/

# The benchmark harness (cmd/retentionbench, docs/benchmarks.md) builds the binaries, starts its own PostgreSQL
# cluster (durable settings, unlike the tests' throwaway one) and runs every scenario against its baseline.
# BENCHFLAGS adds harness flags, e.g. make bench BENCHFLAGS='-rows 1000000 -datasets 50'
# (go run ./cmd/retentionbench -h lists them).
BENCHFLAGS ?=

bench: tools-haproxy ## run the benchmarks at full size (about 30 min) and write the table into docs/benchmarks.md
	$(GO) run ./cmd/retentionbench -write-doc $(BENCHFLAGS)

bench-smoke: tools-haproxy ## run the benchmark harness at smoke size (under a minute; checks it works, the figures mean nothing)
	$(GO) run ./cmd/retentionbench -smoke $(BENCHFLAGS)

# .tools (pinned tools) and .data (the dev database) are kept: both are slow
# to rebuild and .data holds the developer's local data.
clean: ## remove build and test outputs (keeps .tools and .data)
	rm -rf bin/ coverage.out coverage.html cover.out *.test *.prof
