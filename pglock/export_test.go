package pglock

// The table mode's statements, for the benchmark that runs them bare.
const (
	AcquireSQL = acquireSQL
	ReleaseSQL = releaseSQL
	RowLockSQL = rowLockSQL // row mode's lock, for the test of its plan
	RowBusySQL = rowBusySQL // row mode's probe, for the test that a force spares it
)

// The kinds acquire's reads of holds and waiting records, for the test
// that they sum the others up.
const (
	KindLiveSQL  = kindLiveSQL
	KindWaitsSQL = kindWaitsSQL
)
