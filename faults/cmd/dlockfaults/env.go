package main

import (
	"fmt"
	"os"
)

// env starts servers through dlock's internal/testserver, standing in for
// a test: cleanups run at close; a missing server or a failed start panics
// with a skip, which the group's runner recovers.
type env struct {
	cleanups []func()
	dirs     []string
}

// skip is what env's Fatalf and Skipf panic with.
type skip struct{ msg string }

func (e *env) Helper()                  {}
func (e *env) Cleanup(f func())         { e.cleanups = append(e.cleanups, f) }
func (e *env) Skipf(f string, a ...any) { panic(skip{fmt.Sprintf(f, a...)}) }
func (e *env) Fatalf(f string, a ...any) {
	panic(skip{fmt.Sprintf(f, a...)})
}

func (e *env) TempDir() string {
	d, err := os.MkdirTemp("", "dlock-faults-")
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
