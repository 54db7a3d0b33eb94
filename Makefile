# The commands a new user runs. `make test` installs missing servers first.
GO ?= go

.PHONY: test deps vet demo

deps:
	./scripts/install-deps.sh

vet:
	$(GO) vet ./...

test: deps vet
	$(GO) test -race -count=1 ./...

demo:
	$(GO) run ./cmd/dlock demo
