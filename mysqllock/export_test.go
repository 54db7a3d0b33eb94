package mysqllock

// The table mode's statements, for the benchmark that runs them bare.
const (
	AcquireSQL = acquireSQL
	ReleaseSQL = releaseSQL
)

// LockName is lockName, for the GET_LOCK interop test.
var LockName = lockName
