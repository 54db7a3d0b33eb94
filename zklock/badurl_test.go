package zklock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
)

// session_timeout=1ns never got a session and Open said "no answer from zk
// within 5s"; it is now refused at once, with the reason.
func TestTinySessionTimeoutIsRefused(t *testing.T) {
	drivertest.WantInvalidURL(t, "zk://127.0.0.1:1?session_timeout=1ns", "", "session_timeout=1ns is shorter than")
	drivertest.WantInvalidURL(t, "zk://127.0.0.1:1?session_timeout=1000h", "", "session_timeout=1000h0m0s is longer than")
}

// A parameter given twice had one of its values used, silently.
func TestRepeatedParamIsRefused(t *testing.T) {
	drivertest.WantInvalidURL(t, "zk://127.0.0.1:1?session_timeout=5s&session_timeout=30s", "", "session_timeout is given 2 times")
}
