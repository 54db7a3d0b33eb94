package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

func runCmd() *cobra.Command {
	var (
		backend     string
		ttl, wait   time.Duration
		grace       time.Duration
		noWait      bool
		owner       string
		label       string
		waitForever = time.Duration(0)
		kinds       *kindFlags
	)
	cmd := &cobra.Command{
		Use:   "run [flags] NAME -- CMD [ARGS...]",
		Short: "Run a command while holding a lock (like flock(1), across machines)",
		Long: `Run takes the lock NAME, runs CMD with DLOCK_NAME and DLOCK_TOKEN (the fencing
token) in its environment, forwards signals to it, and unlocks when it exits.
If the lease is lost while CMD runs, CMD gets SIGTERM, then SIGKILL after --grace.

Exit status: CMD's own; 3 if the lock was not acquired (--no-wait, or --wait
elapsed); 4 if the lease was lost; 2 for a bad or unreachable backend.

A cron job that must not run twice:
  dlock run --backend redis://127.0.0.1:6379 --no-wait nightly-report -- ./report.sh

--shared takes a read hold of the read-write lock NAME (readers run together,
as with flock -s) and --write its write hold; --permits N one of N permits of
the semaphore NAME (as consul lock -n). A Mutex, a read-write lock and a
semaphore of one name are three different locks.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return fail(exitUsage, "usage: dlock run [flags] NAME -- CMD [ARGS...]")
			}
			return runLocked(cmd.Context(), backend, args[0], args[1:], ttl, wait, noWait, owner, label, grace, kinds)
		},
	}
	addBackendFlag(cmd, &backend)
	kinds = addKindFlags(cmd)
	cmd.Flags().DurationVar(&ttl, "ttl", dlock.DefaultTTL, "lease TTL; renewed every TTL/3 while the command runs")
	cmd.Flags().DurationVar(&wait, "wait", waitForever, "how long to wait for the lock (0: forever)")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "fail at once (exit 3) if the lock is held")
	cmd.Flags().StringVar(&owner, "owner", "", "owner id (default: random)")
	cmd.Flags().StringVar(&label, "label", "", "holder label shown by inspect (default: host:pid)")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the lease is lost")
	return cmd
}

func runLocked(ctx context.Context, backend, name string, argv []string, ttl, wait time.Duration, noWait bool, owner, label string, grace time.Duration, kinds *kindFlags) error {
	c, err := openBackend(ctx, backend)
	if err != nil {
		return err
	}
	defer c.Close()
	opts := []dlock.Option{dlock.WithTTL(ttl)}
	if label != "" {
		opts = append(opts, dlock.WithLabel(label))
	}
	if owner != "" {
		opts = append(opts, dlock.WithOwner(owner))
	}
	m, err := kinds.locker(c, name, opts)
	if err != nil {
		return err
	}

	// Signals that arrive while waiting for the lock end the wait.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if wait > 0 {
		lctx, cancel = context.WithTimeout(lctx, wait)
		defer cancel()
	}
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-lctx.Done():
		}
	}()
	var l *dlock.Lease
	if noWait {
		l, err = m.TryLock(lctx)
	} else {
		l, err = m.Lock(lctx)
	}
	switch {
	case errors.Is(err, dlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fail(exitNotAcquired, "lock %q not acquired: %v", name, err)
	case errors.Is(err, dlock.ErrInvalidName), errors.Is(err, dlock.ErrInvalidTTL), errors.Is(err, dlock.ErrInvalidOwner),
		errors.Is(err, dlock.ErrUnsupported), errors.Is(err, dlock.ErrInvalidConfig):
		return fail(exitUsage, "%v", err)
	case err != nil:
		return fail(exitFailed, "%v", err)
	}
	defer l.Unlock(context.WithoutCancel(ctx))

	env := []string{"DLOCK_NAME=" + name, "DLOCK_TOKEN=" + strconv.FormatUint(l.Token(), 10)}
	return superviseChild(argv, env, sigs, l, "lease on "+strconv.Quote(name), grace)
}

// holding is what a child runs under: a lease, or a term of `dlock elect`.
type holding interface {
	Done() <-chan struct{}
	Err() error
}

// superviseChild runs argv with env added to the environment, forwards
// sigs to it, and returns its exit status as an error. If h ends with an
// error (lost) while it runs, the child gets SIGTERM, then SIGKILL after
// grace, and the status is exitLeaseLost; what names h in messages.
func superviseChild(argv, env []string, sigs <-chan os.Signal, h holding, what string, grace time.Duration) error {
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(), env...)
	if err := child.Start(); err != nil {
		return fail(exitFailed, "start %s: %v", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	var lost bool
	var kill <-chan time.Time
	for {
		select {
		case sig := <-sigs:
			_ = child.Process.Signal(sig)
		case <-h.Done():
			if h.Err() != nil && !lost {
				lost = true
				fmt.Fprintf(os.Stderr, "dlock: %s lost (%v); stopping %s\n", what, h.Err(), argv[0])
				_ = child.Process.Signal(syscall.SIGTERM)
				kill = time.After(grace)
			}
		case <-kill:
			_ = child.Process.Kill()
		case err := <-exited:
			if lost {
				return fail(exitLeaseLost, "%s was lost while %s ran", what, argv[0])
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code := ee.ExitCode()
				if code < 0 {
					code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
				}
				return &exitError{code: code, err: errors.New("")}
			}
			if err != nil {
				return fail(exitFailed, "%v", err)
			}
			return nil
		}
	}
}
