# The commands a new user runs. `make test` installs missing servers first.
GO ?= go

.PHONY: test test-busy deps tidy vet lint demo bench faults

deps:
	./scripts/install-deps.sh

vet:
	$(GO) vet ./...

# staticcheck at a pinned version, run from the module proxy so that it is
# not a requirement of the library's go.mod; zero findings is the bar.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: vet
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...

tidy:
	$(GO) mod tidy -diff # fails when go.mod or go.sum would change

test: deps tidy lint
	cd bench && $(GO) mod tidy -diff # the benchmark tool is compiled and linted (lint), not run
	$(GO) test -race -count=1 -timeout 20m ./... # pglock's suite took 8 of go test's default 10 minutes on a busy 2-core machine
	$(GO) test -count=1 -run '^TestEnsemble$$' ./zklock/ # not under -race: see zklock/ensemble_test.go
	$(GO) test -count=1 -run '^TestLockUnlockAllocs$$' . ./redislock/ # allocations of a plain build, not -race's

# The same suite on a busy machine: one busy loop per core runs beside it
# (scripts/busy.sh stops them when the suite ends, fails or is interrupted).
# Timing-sensitive tests leave room for a starved process; see the README.
test-busy:
	./scripts/busy.sh $(MAKE) test

# Runs every backend beside its peers and rewrites docs/benchmarks.md's table
# and charts (a few minutes).
bench: deps
	cd bench && $(GO) run . -docs ../docs

demo:
	$(GO) run ./cmd/dlock demo

# The full fault suite (package faults): every backend under every fault
# that applies, 3 injections each; rewrites docs/reliability.md (about 35
# minutes, with a progress line on a terminal).
faults: deps
	$(GO) build -o bin/dlockfaults ./faults/cmd/dlockfaults
	./bin/dlockfaults -docs docs
