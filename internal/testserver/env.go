package testserver

import (
	"fmt"
	"os"
	"sync"
)

// Env stands in for a test where a program, not a test, starts servers
// (the benchmarks, the fault runner): it is a TB whose cleanups run, last
// first, and whose temp dirs are removed at Close.
type Env struct {
	// Prefix begins the names of the temp dirs TempDir makes.
	Prefix string
	// Fail is told what Fatalf or Skipf said (skipped is true for Skipf).
	// It must not return: it exits or panics. Nil panics with the message.
	Fail func(skipped bool, msg string)

	mu       sync.Mutex
	cleanups []func()
	dirs     []string
}

// Helper does nothing: a program has no test lines to skip.
func (e *Env) Helper() {}

// Cleanup registers f to run at Close.
func (e *Env) Cleanup(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, f)
}

// Skipf reports through Fail that the server cannot run here.
func (e *Env) Skipf(format string, args ...any) { e.fail(true, fmt.Sprintf(format, args...)) }

// Fatalf reports through Fail that starting a server failed.
func (e *Env) Fatalf(format string, args ...any) { e.fail(false, fmt.Sprintf(format, args...)) }

func (e *Env) fail(skipped bool, msg string) {
	if e.Fail == nil {
		panic(msg)
	}
	e.Fail(skipped, msg)
}

// TempDir makes a temp dir, removed at Close.
func (e *Env) TempDir() string {
	d, err := os.MkdirTemp("", e.Prefix)
	if err != nil {
		e.Fatalf("%v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dirs = append(e.dirs, d)
	return d
}

// Close runs the cleanups, last first, and removes the temp dirs. The Env
// can be used again after.
func (e *Env) Close() {
	e.mu.Lock()
	cleanups, dirs := e.cleanups, e.dirs
	e.cleanups, e.dirs = nil, nil
	e.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}
