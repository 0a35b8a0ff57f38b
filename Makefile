# workq — see README.md. `make run` and `make test` are the quick start.
SHELL := /bin/bash
GO    ?= go

# Pinned tool versions. sqlc is built from source (cgo) once per version into
# a cache outside the tree, so a fresh clone on the same machine reuses it.
SQLC_VERSION := v1.31.1
TOOLS_DIR    ?= $(HOME)/.cache/workq/tools
SQLC         := $(TOOLS_DIR)/sqlc-$(SQLC_VERSION)/sqlc
# staticcheck is built the same way (pure Go, under a minute).
STATICCHECK_VERSION := v0.8.2
STATICCHECK         := $(TOOLS_DIR)/staticcheck-$(STATICCHECK_VERSION)/staticcheck

TEST_FLAGS  ?= -count=1 -timeout 20m
# The concurrent packages (every package whose code or tests start
# goroutines, but cmd/workq: docs/testing.md, "Race coverage") run under the
# race detector in every `make test`, in two sets, one per lane: RACE_PKGS
# in lane 1, RACE_PKGS_2 (the root package and package test, the two
# longest, and migrate) in lane 2, which keeps the lanes about even.
RACE_PKGS   := ./api/... ./internal/ui/... ./internal/worker/... ./internal/lease/... ./internal/reaper/... ./internal/lock/... ./internal/maintain/... ./publish/... ./timers/... ./internal/schedule/... ./inbox/... ./outbox/... ./internal/metrics/... ./internal/tracing/... \
               ./internal/shardlimit/... ./internal/shardlist/... ./internal/startstop/... ./internal/jobq/... ./internal/rundir/... ./internal/pgembed/... ./internal/testutil/... ./examples/orders/... \
               ./internal/outboxrt/... ./internal/inboxrt/... ./internal/timersrt/... ./internal/topicproc/...
RACE_PKGS_2 := . ./test/ ./migrate/...
BENCH_FLAGS ?=
# make fuzz: how long each fuzz target runs.
FUZZTIME    ?= 10s
# Every fuzz target, as package:FuzzName (docs/reliability.md).
FUZZ_TARGETS := ./internal/jobq:FuzzEnqueue ./outbox:FuzzSend ./inbox:FuzzReceive ./timers:FuzzSchedule ./internal/schedule:FuzzParseCron ./api:FuzzRequestBody
# make soak: how long the soak runs, and which: MODE=load (the fault soak at a
# fixed offered load, test/soak_test.go) or MODE=full (full speed on a
# throwaway production-like cluster, scripts/bench-sustained.sh; RIVER=path
# to River's CLI runs River the same way after it).
SOAK        ?= 10m
MODE        ?= load

.PHONY: run release test-load test test-serial test-lane-1 test-lane-2 test-race test-race-2 test-rest test-faults test-soak faults-long faults-failover generate check-generated staticcheck check-large-files lint fmt build bench clean tools fuzz soak measure-flow measure-workflows

## run: migrate and run workq end to end (throwaway PostgreSQL when DATABASE_URL is unset).
## It runs the built binary, not `go run`: go run exits 1 whenever it is
## interrupted, whatever its program did, so Ctrl-C ended in "make: *** Error 1".
run: build
	./bin/workq run

## test: the whole suite (docs/testing.md). scripts/test-env.sh first
## installs and starts what the tests need and is missing. Then, at the same
## time: the check that db/gen is current (building the pinned sqlc once),
## staticcheck (building the pinned staticcheck once), gofmt, the check for
## committed large files, and two lanes of tests, each running one test
## binary at a time: the concurrent packages under the race detector then
## the 60 s soak; the other packages then the short fault scenarios. go vet runs inside the go
## test runs (-vet=all).
test:
	@$(WITH_TEST_ENV) $(MAKE) --no-print-directory -k -j6 test-lane-1 test-lane-2 check-generated staticcheck fmt check-large-files

# The test command's machine set-up, for targets that need the test services:
# it exports TEST_DATABASE_URL into the recipe line it starts.
WITH_TEST_ENV = env=$$(scripts/test-env.sh) && eval "$$env" &&
# $(call timed,NAME,COMMAND): run COMMAND, then say how long it took.
timed = start=$$(date +%s); $(2); rc=$$?; echo "make test: $(1) took $$(( $$(date +%s) - start ))s$$([ $$rc = 0 ] || echo ", FAILED")"; exit $$rc
# $(call lane,TARGET...): make each target in turn, all of them even when one
# fails, and fail if any did.
lane = rc=0; for t in $(1); do $(MAKE) --no-print-directory $$t TEST_P='-p 1' || rc=1; done; exit $$rc
# Packages without test files, which go test does not vet.
NOTEST_PKGS = $$($(GO) list -f '{{if not (or .TestGoFiles .XTestGoFiles)}}{{.ImportPath}}{{end}}' ./...)
# Package test's two longest tests, which test-faults and test-soak run in
# processes of their own.
OWN_PROCESS_TESTS := ^(TestFaults|TestSoak)$$
# go test's -p: empty for its default (GOMAXPROCS); the lanes set -p 1.
TEST_P ?=

## test-serial: make test's parts one after another, go test at its default
## -p (the order make test had before the lanes), to compare
test-serial:
	@$(WITH_TEST_ENV) $(MAKE) --no-print-directory -k check-generated staticcheck fmt check-large-files test-race test-race-2 test-rest test-faults test-soak

test-lane-1:
	@+$(call lane,test-race test-soak)

test-lane-2:
	@+$(call lane,test-rest test-race-2 test-faults)

## test-load: go test of PKGS (default . and ./internal/worker; RUN to filter) COUNT
## times (5) under the race detector with LOAD CPU burners beside it (16;
## LOAD=0 for none), and each test's passes: the check of tests that depend
## on timing (docs/testing.md, "Tests that depend on timing")
test-load:
	@$(WITH_TEST_ENV) scripts/test-load.sh

## test-race: the concurrent packages of lane 1 under the race detector
test-race:
	@$(call timed,race phase,$(GO) test $(TEST_FLAGS) $(TEST_P) -vet=all -race $(RACE_PKGS))

## test-race-2: the root package, package test (without TestFaults and TestSoak) and migrate under the race detector
test-race-2:
	@$(call timed,race phase 2,$(GO) test $(TEST_FLAGS) $(TEST_P) -vet=all -race -skip '$(OWN_PROCESS_TESTS)' $(RACE_PKGS_2))

## test-rest: every other package (none of them starts goroutines in the test process but cmd/workq)
test-rest:
	@$(call timed,other packages,$(GO) test $(TEST_FLAGS) $(TEST_P) -vet=all $$(comm -23 <($(GO) list ./... | sort) <($(GO) list $(RACE_PKGS) $(RACE_PKGS_2) | sort)) && $(GO) vet $(NOTEST_PKGS))

## test-faults: the short fault-injection scenarios (TestFaults), in a process of their own
test-faults:
	@$(call timed,fault scenarios,$(GO) test $(TEST_FLAGS) -vet=off -run '^TestFaults$$' ./test/)

## test-soak: the 60 s soak (TestSoak), in a process of its own
test-soak:
	@$(call timed,soak,$(GO) test $(TEST_FLAGS) -vet=off -run '^TestSoak$$' ./test/)

## faults-long: the long versions of the fault-injection scenarios (docs/reliability.md);
## their short versions run in `make test`
faults-long:
	@$(WITH_TEST_ENV) WORKQ_FAULTS_LONG=1 $(GO) test -count=1 -timeout 60m -v -run 'TestFaults|TestHistoryChecker' ./test/

## faults-failover: the failover scenarios (docs/reliability.md), with the long one on a
## pg_auto_failover formation (scripts/test-env.sh installs it from Debian's packages)
faults-failover:
	@export WORKQ_FAILOVER_PGAF=1 && $(WITH_TEST_ENV) $(GO) test -count=1 -timeout 30m -v -run 'TestFaults/failover' ./test/

## generate: regenerate internal/db/gen from db/migrations and db/queries
generate: $(SQLC)
	$(SQLC) generate

## check-generated: fail when internal/db/gen differs from what the committed SQL generates
check-generated: $(SQLC)
	@$(SQLC) diff || { echo "internal/db/gen is stale: run 'make generate' and commit the result" >&2; exit 1; }

## staticcheck: staticcheck's default checks on every package and its tests
staticcheck: $(STATICCHECK)
	@$(STATICCHECK) ./...

## check-large-files: fail when a committed file over 1 MiB is not on
## scripts/check-large-files.sh's allow-list of data files
check-large-files:
	@scripts/check-large-files.sh

## lint: gofmt, go vet and staticcheck
lint: fmt staticcheck
	$(GO) vet ./...

## fmt: fail when a Go file is not gofmt-formatted
fmt:
	@unformatted=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go') | grep -v '^internal/db/gen/' || true); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

# The version stamped into the binary (workq version): `git describe` of a
# tagged checkout, v0.0.0-dev+COMMIT[.dirty] while no version is tagged,
# v0.0.0-dev outside a git checkout. Override with make VERSION=...
VERSION ?= $(shell scripts/version.sh)
LDFLAGS := -X main.stampedVersion=$(VERSION)
BIN     ?= bin/workq

## build: the workq binary at $(BIN), its version stamped
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/workq

## release: static, trimmed binaries for the release platforms in dist/,
## version stamped, with their SHA-256 sums
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
release:
	@rm -rf dist && mkdir -p dist
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=dist/workq-$(VERSION)-$$os-$$arch; \
		echo "release: $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $$out ./cmd/workq; \
	done; cd dist && sha256sum workq-* > SHA256SUMS

## bench: Go benchmarks of the lease engine (workq bench is the end-to-end one)
bench:
	@$(WITH_TEST_ENV) $(GO) test -run '^$$' -bench . -benchtime 20x $(BENCH_FLAGS) ./test/

## fuzz: run each fuzz target for FUZZTIME (default 10s) against the test
## database; a failure leaves its input in the package's testdata/fuzz
fuzz:
	@$(WITH_TEST_ENV) set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "fuzz $$pkg $$name for $(FUZZTIME)"; \
		GO=$(GO) scripts/fuzz-one.sh $$pkg $$name $(FUZZTIME); \
	done

## soak: the soak with autovacuum on for SOAK (default 10m; not in CI);
## MODE=full runs it at full speed (docs/throughput.md "Sustained")
soak:
ifeq ($(MODE),full)
	@DURATION=$(SOAK) RIVER=$(RIVER) scripts/bench-sustained.sh
else ifeq ($(MODE),load)
	@$(WITH_TEST_ENV) WORKQ_SOAK=$(SOAK) $(GO) test -count=1 -timeout 30m -run '^TestSoak$$' -v ./test/
else
	@echo "make soak: MODE must be load or full, got $(MODE)"; exit 2
endif

## measure-flow: the flow-control measurements (test/flow_measure_test.go,
## build tag measure; not in make test): accuracy over two shards, fairness,
## adaptation to a throttling receiver. RUN narrows them (accuracy, fairness
## or adaptive).
measure-flow:
	@$(WITH_TEST_ENV) $(GO) test -tags=measure -count=1 -timeout 30m -v -run 'TestFlowMeasure/$(RUN)' ./test/

## measure-workflows: the workflow measurements (test/workflow_measure_test.go,
## build tag measure; not in make test): a fan-in of 10,000 tasks against
## 10,000 independent jobs, a chain's hand-off against an idle pickup, and
## where the fan-in's time goes (pg_stat_statements). RUN narrows them
## (fanin, chain or profile); WORKQ_MEASURE_RUNS the runs of each (3).
measure-workflows:
	@$(WITH_TEST_ENV) $(GO) test -tags=measure -count=1 -timeout 30m -v -run 'TestWorkflowMeasure/$(RUN)' ./test/

tools: $(SQLC) $(STATICCHECK)

# libpg_query's C (6 MB, compiled one file after another) is built without
# optimisation: a third of the compile time, and sqlc diff still takes about
# a second.
$(SQLC):
	@echo "building sqlc $(SQLC_VERSION) (once; takes a few minutes)"
	@mkdir -p $(dir $(SQLC))
	GOBIN=$(dir $(SQLC)) CGO_ENABLED=1 CGO_CFLAGS="-O0 -g" $(GO) install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)

$(STATICCHECK):
	@echo "building staticcheck $(STATICCHECK_VERSION) (once)"
	@mkdir -p $(dir $(STATICCHECK))
	GOBIN=$(dir $(STATICCHECK)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

clean:
	rm -rf bin dist .workq

## docs: rewrite the generated parts of docs/cli.md (every command's usage and
## flags) and docs/configuration.md (the settings table) from the binary;
## TestDocsGenerated in `make test` fails while they are stale
.PHONY: docs
docs:
	$(GO) test -count=1 -run '^TestDocsGenerated$$' ./cmd/workq/ -update-docs

# make generate rewrites the generated docs as well as db/gen.
generate: docs
