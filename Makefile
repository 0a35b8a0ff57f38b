# workq — see README.md. `make run` and `make test` are the quick start.
SHELL := /bin/bash
GO    ?= go

# Pinned tool versions. sqlc is built from source (cgo) once per version into
# a cache outside the tree, so a fresh clone on the same machine reuses it.
SQLC_VERSION := v1.31.1
TOOLS_DIR    ?= $(HOME)/.cache/workq/tools
SQLC         := $(TOOLS_DIR)/sqlc-$(SQLC_VERSION)/sqlc

TEST_FLAGS  ?= -count=1 -timeout 20m
# The concurrent packages run under the race detector in every `make test`.
RACE_PKGS   := ./api/... ./worker/... ./lease/... ./reaper/... ./lock/... ./maintain/... ./publish/... ./timers/... ./schedule/... ./inbox/... ./outbox/... ./metrics/... ./tracing/...
BENCH_FLAGS ?=
# make fuzz: how long each fuzz target runs.
FUZZTIME    ?= 10s
# Every fuzz target, as package:FuzzName (docs/reliability.md).
FUZZ_TARGETS := .:FuzzEnqueue ./outbox:FuzzSend ./inbox:FuzzReceive ./timers:FuzzSchedule ./schedule:FuzzParseCron ./api:FuzzRequestBody
# make soak: how long the soak runs.
SOAK        ?= 10m

.PHONY: run test faults-long generate check-generated lint build bench clean tools fuzz soak

## run: migrate and run workq end to end (throwaway PostgreSQL when DATABASE_URL is unset).
## It runs the built binary, not `go run`: go run exits 1 whenever it is
## interrupted, whatever its program did, so Ctrl-C ended in "make: *** Error 1".
run: build
	./bin/workq run

## test: the whole suite, including the check that db/gen is current; the
## concurrent packages under the race detector
test: check-generated lint
	$(GO) test $(TEST_FLAGS) -race $(RACE_PKGS)
	$(GO) test $(TEST_FLAGS) $$($(GO) list ./... | grep -v -e '/api' -e '/worker' -e '/lease' -e '/reaper' -e '/lock' -e '/maintain' -e '/publish' -e '/timers' -e '/schedule' -e '/inbox' -e '/outbox' -e '/metrics' -e '/tracing')

## faults-long: the long versions of the fault-injection scenarios (docs/reliability.md);
## their short versions run in `make test`
faults-long:
	WORKQ_FAULTS_LONG=1 $(GO) test -count=1 -timeout 60m -v -run 'TestFaults|TestHistoryChecker' ./test/

## generate: regenerate db/gen from db/migrations and db/queries
generate: $(SQLC)
	$(SQLC) generate

## check-generated: fail when db/gen differs from what the committed SQL generates
check-generated: $(SQLC)
	@$(SQLC) diff || { echo "db/gen is stale: run 'make generate' and commit the result" >&2; exit 1; }

## lint: gofmt and go vet
lint:
	@unformatted=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go') | grep -v '^db/gen/' || true); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

build:
	$(GO) build -o bin/workq ./cmd/workq

## bench: Go benchmarks of the lease engine (workq bench is the end-to-end one)
bench:
	$(GO) test -run '^$$' -bench . -benchtime 20x $(BENCH_FLAGS) ./test/

## fuzz: run each fuzz target for FUZZTIME (default 10s) against the test
## database; a failure leaves its input in the package's testdata/fuzz
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "fuzz $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## soak: the soak with autovacuum on for SOAK (default 10m; not in CI)
soak:
	WORKQ_SOAK=$(SOAK) $(GO) test -count=1 -timeout 30m -run '^TestSoak$$' -v ./test/

tools: $(SQLC)

$(SQLC):
	@echo "building sqlc $(SQLC_VERSION) (once; takes a few minutes)"
	@mkdir -p $(dir $(SQLC))
	GOBIN=$(dir $(SQLC)) CGO_ENABLED=1 $(GO) install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)

clean:
	rm -rf bin .workq

## docs: rewrite the generated parts of docs/cli.md (every command's usage and
## flags) and docs/configuration.md (the settings table) from the binary;
## TestDocsGenerated in `make test` fails while they are stale
.PHONY: docs
docs:
	$(GO) test -count=1 -run '^TestDocsGenerated$$' ./cmd/workq/ -update-docs

# make generate rewrites the generated docs as well as db/gen.
generate: docs
