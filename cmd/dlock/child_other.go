//go:build !linux

package main

import (
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
)

// startChild starts argv with env, in a process group of its own if group,
// as dlock's direct child. Systems other than Linux have no parent-death
// signal that Go can set, so a command whose dlock was killed with SIGKILL
// runs on without the lock, with its own children, until it ends by itself
// (dlock's own death by SIGTERM, SIGINT, SIGHUP or SIGQUIT is forwarded to
// it as usual). Such a command should fence its writes with DLOCK_TOKEN.
func startChild(argv, env []string, group bool) (*startedChild, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	pid := cmd.Process.Pid
	var stopped atomic.Bool
	go func() {
		err := cmd.Wait()
		if stopped.Load() && group {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // what the command left of its group
		}
		exited <- err
	}()
	signal := func(sig syscall.Signal) {
		if group {
			// The group's id is the child's pid.
			_ = syscall.Kill(-pid, sig)
			return
		}
		_ = cmd.Process.Signal(sig)
	}
	return &startedChild{
		pid:    pid,
		signal: signal,
		stop: func() {
			stopped.Store(true)
			signal(syscall.SIGTERM)
		},
		exited: exited,
	}, nil
}

// runGuardIfAsked: the guard process is Linux's (see child_linux.go).
func runGuardIfAsked() {}

// childSysProcAttr: systems other than Linux have no parent-death signal
// that Go can set; the child gets its own process group unless dlock's
// stdin is a terminal, as on Linux.
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

// terminalSent is false here: every caught signal is forwarded.
func terminalSent(syscall.Signal) bool { return false }
