package main

import (
	"log"

	"github.com/dlock/dlock/internal/testserver"
)

// env starts servers through dlock's internal/testserver, with itself as
// the test: cleanups run at close, a missing server ends the program.
type env struct{ testserver.Env }

func newEnv() *env {
	e := &env{testserver.Env{Prefix: "dlock-bench-"}}
	e.Fail = func(skipped bool, msg string) {
		if skipped {
			msg = "skipped: " + msg
		}
		e.Close()
		log.Fatal(msg)
	}
	return e
}
