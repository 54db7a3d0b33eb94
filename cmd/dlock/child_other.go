//go:build !linux

package main

import (
	"os"
	"syscall"
)

// childSysProcAttr: systems other than Linux have no parent-death signal
// that Go can set, so a child whose dlock was killed with SIGKILL runs on
// without the lock until it ends by itself (dlock's own death by SIGTERM,
// SIGINT, SIGHUP or SIGQUIT is forwarded to it as usual). Such a child
// should fence its writes with DLOCK_TOKEN. The child gets its own process
// group unless dlock's stdin is a terminal, as on Linux.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: !isTerminal(os.Stdin)}
}

// isTerminal reports whether f is a character device: a terminal, or (a
// mistake this fallback accepts) /dev/null.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// terminalSize is unknown here: top does not cut its lines.
func terminalSize(*os.File) (cols, rows int) { return 0, 0 }
