package pglock

// The table mode's statements, for the benchmark that runs them bare.
const (
	AcquireSQL = acquireSQL
	ReleaseSQL = releaseSQL
	RowLockSQL = rowLockSQL // row mode's lock, for the test of its plan
	RowBusySQL = rowBusySQL // row mode's probe, for the test that a force spares it
)
