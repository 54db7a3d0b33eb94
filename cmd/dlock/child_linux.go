package main

import (
	"os"
	"syscall"
	"unsafe"
)

// childSysProcAttr: on Linux the kernel sends the child SIGKILL when the
// thread that started it exits (superviseChild keeps that thread alive
// while the child runs), so the child dies with dlock even on kill -9; Go
// also kills a child whose parent died before the signal was armed. The
// child gets its own process group, so that signals reach the children it
// starts too, unless dlock's stdin is a terminal: then it stays in dlock's
// group, where the terminal's job control (Ctrl-C, Ctrl-Z, reading the
// terminal) works as for any foreground command. The parent-death signal
// reaches the child only, not its own children.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Pdeathsig: syscall.SIGKILL,
		Setpgid:   !isTerminal(os.Stdin),
	}
}

// isTerminal reports whether f is a terminal (not merely a character
// device such as /dev/null).
func isTerminal(f *os.File) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}

// terminalSize returns f's terminal's columns and rows, or zeros if f is
// not a terminal.
func terminalSize(f *os.File) (cols, rows int) {
	var ws struct{ Row, Col, X, Y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
	if errno != 0 {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}
