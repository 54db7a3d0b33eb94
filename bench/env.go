package main

import (
	"log"
	"os"
)

// env starts servers through dlock's internal/testserver, with itself as
// the test: cleanups run at close, a missing server ends the program.
type env struct {
	cleanups []func()
	dirs     []string
}

func newEnv() *env { return &env{} }

func (e *env) Helper()                  {}
func (e *env) Cleanup(f func())         { e.cleanups = append(e.cleanups, f) }
func (e *env) Skipf(f string, a ...any) { e.Fatalf("skipped: "+f, a...) }
func (e *env) Fatalf(f string, a ...any) {
	e.close()
	log.Fatalf(f, a...)
}

func (e *env) TempDir() string {
	d, err := os.MkdirTemp("", "dlock-bench-")
	if err != nil {
		e.Fatalf("%v", err)
	}
	e.dirs = append(e.dirs, d)
	return d
}

func (e *env) close() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
	for _, d := range e.dirs {
		_ = os.RemoveAll(d)
	}
	e.dirs = nil
}
