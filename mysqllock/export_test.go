package mysqllock

import (
	"testing"
	"time"
)

// The table mode's statements, for the benchmark that runs them bare, and
// the kinds acquire's read of the holds, for the test that it sums them.
const (
	AcquireSQL  = acquireSQL
	KindLiveSQL = kindLiveSQL
)

// ReleaseQuery is releaseQuery, for the same benchmark.
var ReleaseQuery = releaseQuery

// LockName is lockName, for the GET_LOCK interop test.
var LockName = lockName

// SetAskWait sets how long Open's second connection to a silent server
// waits for an answer, until t ends; t must not run in parallel.
func SetAskWait(t testing.TB, d time.Duration) {
	old := askWait
	askWait = d
	t.Cleanup(func() { askWait = old })
}
