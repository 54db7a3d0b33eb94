//go:build !race

package redislock_test

// raceOn reports a -race build (see race_test.go).
const raceOn = false
