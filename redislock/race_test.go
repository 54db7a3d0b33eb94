//go:build race

package redislock_test

// raceOn reports a -race build, whose allocations are not a plain build's
// (sync.Pool drops a quarter of what is put back, on purpose).
const raceOn = true
