package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// forwardedSignals are the signals dlock catches: while it waits for a lock
// they end the wait; while a command runs they are forwarded to it.
// SIGUSR1, SIGUSR2 and SIGALRM too: Go catches and drops them unless asked,
// so a command never got them and dlock ran on (an adversary pass).
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM}

// signalCatcher owns the one channel that receives dlock's signals. Exactly
// one goroutine receives from it at a time: first the wait for the lock
// (cancelOnSignal), then the child's supervisor (superviseChild). Two
// receivers on one channel split the signals between them at random: the
// first SIGTERM sent to `dlock run` used to reach the child in only a few
// runs out of five.
type signalCatcher struct{ ch chan os.Signal }

// catchSignals starts catching forwardedSignals; stop undoes it.
func catchSignals() (s *signalCatcher, stop func()) {
	s = &signalCatcher{ch: make(chan os.Signal, 8)}
	signal.Notify(s.ch, forwardedSignals...)
	return s, func() { signal.Stop(s.ch) }
}

// cancelOnSignal returns a context for the wait for a lock or a lead:
// bounded by wait (0: unbounded) and cancelled by the first caught signal.
// end stops the watching goroutine (it has returned when end returns),
// cancels ctx and returns the signal that cancelled it, or nil; from then on
// the catcher's signals are the caller's again.
func (s *signalCatcher) cancelOnSignal(parent context.Context, wait time.Duration) (ctx context.Context, end func() os.Signal) {
	ctx, cancel := context.WithCancel(parent)
	if wait > 0 {
		ctx, cancel = context.WithTimeout(parent, wait)
	}
	stop := make(chan struct{})
	got := make(chan os.Signal, 1)
	go func() {
		select {
		case sig := <-s.ch:
			cancel()
			got <- sig
		case <-stop:
			got <- nil
		}
	}()
	return ctx, func() os.Signal {
		close(stop)
		sig := <-got
		cancel()
		return sig
	}
}

// childSpec says what superviseChild runs and how it stops it.
type childSpec struct {
	Argv []string // the command and its arguments
	Env  []string // added to dlock's own environment
	// PassURL keeps DLOCK_URL (and its password) in the command's
	// environment; without it the command does not get it.
	PassURL bool
	// Signals, if not nil, are forwarded to the child's process group. The
	// supervisor must be the channel's only receiver (see signalCatcher).
	Signals *signalCatcher
	// Stop, when closed, stops the child: SIGTERM to its process group,
	// then SIGKILL after Grace if it has not exited. A nil Stop never fires.
	Stop  <-chan struct{}
	Grace time.Duration
	// Stopping, if set, is called once when Stop fires, before SIGTERM (to
	// say why the child is being stopped).
	Stopping func()
	// Started, if set, is called with the child's pid once it runs.
	Started func(pid int)
}

// childExit is how a supervised child ended.
type childExit struct {
	Code    int  // its exit status; 128+N if signal N killed it
	Stopped bool // Stop fired while it ran
}

// superviseChild starts spec.Argv with stdin, stdout and stderr shared with
// dlock, forwards signals to it, stops it when spec.Stop fires, and returns
// when it has exited. It runs in its own process group (unless it must
// share dlock's terminal), and forwarded signals, the SIGTERM and the
// SIGKILL go to that whole group, so the command's own children are stopped
// with it. The group may not outlive dlock: on Linux a guard process
// between dlock and the command kills it when dlock dies, even by kill -9
// (see startChild for how, and what other systems get).
//
// An error means the child could not be started.
func superviseChild(spec childSpec) (childExit, error) {
	if len(spec.Argv) == 0 {
		return childExit{}, errors.New("no command")
	}
	shared := isTerminal(os.Stdin) // the command stays in dlock's group, the terminal's
	child, err := startChild(spec.Argv, append(childEnv(os.Environ(), spec.PassURL), spec.Env...), !shared)
	if err != nil {
		return childExit{}, err
	}
	if spec.Started != nil {
		spec.Started(child.pid)
	}

	var sigs <-chan os.Signal
	if spec.Signals != nil {
		sigs = spec.Signals.ch
	}
	stop := spec.Stop
	var kill <-chan time.Time
	var stopped bool
	for {
		select {
		case sig := <-sigs:
			if s, ok := sig.(syscall.Signal); ok && !(shared && terminalSent(s)) {
				child.signal(s)
			}
		case <-stop:
			stop = nil // once: a closed channel would make this loop spin
			stopped = true
			if spec.Stopping != nil {
				spec.Stopping()
			}
			child.stop()
			t := time.NewTimer(spec.Grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			child.signal(syscall.SIGKILL)
		case err := <-child.exited:
			return childExit{Code: exitCode(err), Stopped: stopped}, nil
		}
	}
}

// startedChild is a command startChild started.
type startedChild struct {
	pid int // the command's
	// signal sends a signal to the command's process group (to the command
	// alone if it shares dlock's). Only superviseChild's loop calls it, and
	// not after exited has said the command ended.
	signal func(syscall.Signal)
	// stop sends SIGTERM as signal does, for a lost lease: and once the
	// command has exited, SIGKILL to whatever it left running (its group,
	// or on a terminal the processes below the guard), which the SIGKILL
	// after --grace would no longer reach.
	stop   func()
	exited <-chan error // gets how it ended (see exitCode), once
}

// exitCode is the shell's view of how a command ended: its exit status, or
// 128+N when signal N killed it.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitFailed
}

// signalExitCode is dlock's exit status when a signal ended it before the
// command started.
func signalExitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFailed
}

// startError words a failure to start the command.
func startError(argv []string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return fail(exitNotFound, "start %s: %v", argv[0], err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
		return fail(exitNotExecutable, "start %s: %v", argv[0], err)
	}
	return fail(exitFailed, "start %s: %v", argv[0], err)
}

// childEnv is env without DLOCK_URL, unless pass: the URL may hold the
// store's password, which the command has no need of.
func childEnv(env []string, pass bool) []string {
	if pass {
		return env
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "DLOCK_URL=") {
			out = append(out, kv)
		}
	}
	return out
}

// passURL is --pass-url of run and elect.
var passURL bool

func addPassURLFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&passURL, "pass-url", false, "keep DLOCK_URL (and the password in it) in CMD's environment; by default CMD does not get it")
}
