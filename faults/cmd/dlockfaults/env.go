package main

import "github.com/dlock/dlock/internal/testserver"

// skip is what the group's env panics with when a server is missing or
// fails to start; the group's runner recovers it.
type skip struct{ msg string }

// newEnv starts servers through dlock's internal/testserver, standing in
// for a test: cleanups run at Close; a missing server or a failed start
// panics with a skip.
func newEnv() *testserver.Env {
	return &testserver.Env{Prefix: "dlock-faults-", Fail: func(_ bool, msg string) { panic(skip{msg}) }}
}
