package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

func runCmd() *cobra.Command {
	var (
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
token) in its environment (without DLOCK_URL, whose password CMD has no need
of, unless --pass-url), forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
SIGUSR2 and SIGALRM to it, and unlocks when it exits. If the lease is lost while CMD runs, CMD gets
SIGTERM, then SIGKILL after --grace; once CMD has exited, what it left
running gets SIGKILL at once.

CMD may not outlive its guard: on Linux, when dlock dies, even by kill -9, a
guard process between dlock and CMD kills CMD's process group (SIGKILL), the
children CMD started with it. CMD runs in its own process group, which gets
the forwarded signals, unless stdin is a terminal: then it shares dlock's, so
that job control works; signals go to CMD alone (Ctrl-C and Ctrl-\ come from
the terminal, not from dlock) and SIGKILL to every process below the guard,
its subreaper. A process that leaves the group (setsid, a daemon) is beyond
the guard, except on a terminal. Other systems
have no parent-death signal: there a CMD whose dlock was killed with SIGKILL
runs on, with its children, until it ends by itself.

While dlock itself is stopped (SIGSTOP, a frozen VM or container) it cannot
renew: once the TTL passes, another process may take the lock while CMD runs
on, unprotected, until dlock resumes, sees the loss and stops CMD. A CMD
whose writes must never overlap passes DLOCK_TOKEN to a store that refuses
tokens older than the newest it has seen (fencing).

Exit status: CMD's own (128+N if signal N killed it); 3 if the lock was not
acquired (--no-wait, or --wait elapsed; the error names the holder); 4 if
the lease was lost, while CMD ran or found at the final unlock (CMD's
status is then in the message); 2 for a bad or unreachable backend, one
that failed before CMD started, or bad flags; 127 if CMD was not found, 126 if it could not be executed (as env,
timeout and nohup say); 128+N if signal N came before CMD started (while
waiting for the lock).

A cron job that must not run twice, the URL (and its password) kept off the
command line:
  DLOCK_URL=redis://127.0.0.1:6379 dlock run --no-wait nightly-report -- ./report.sh

--shared takes a read hold of the read-write lock NAME (readers run together,
as with flock -s) and --write its write hold; --permits N one of N permits of
the semaphore NAME (as consul lock -n). A Mutex, a read-write lock and a
semaphore of one name are three different locks.`,
		Args: cobra.ArbitraryArgs, // checked below, with our usage line
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return fail(exitUsage, "usage: dlock run [flags] NAME -- CMD [ARGS...]")
			}
			if noWait && cmd.Flags().Changed("wait") {
				return fail(exitUsage, "--wait and --no-wait are exclusive: --no-wait tries once, --wait waits at most that long")
			}
			if args[1] == "" { // exec says "no command", after the lock was taken
				return fail(exitUsage, "usage: dlock run [flags] NAME -- CMD [ARGS...]: CMD is empty")
			}
			return runLocked(cmd.Context(), args[0], args[1:], ttl, wait, noWait, owner, label, grace, kinds)
		},
	}
	kinds = addKindFlags(cmd)
	cmd.Flags().DurationVar(&ttl, "ttl", dlock.DefaultTTL, "lease TTL; renewed every TTL/3 while the command runs")
	cmd.Flags().DurationVar(&wait, "wait", waitForever, "how long to wait for the lock (0: forever)")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "fail at once (exit 3) if the lock is held")
	cmd.Flags().StringVar(&owner, "owner", "", "owner id (default: random)")
	cmd.Flags().StringVar(&label, "label", "", "holder label shown by inspect (default: host:pid)")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the lease is lost")
	addPassURLFlag(cmd)
	return cmd
}

func runLocked(ctx context.Context, name string, argv []string, ttl, wait time.Duration, noWait bool, owner, label string, grace time.Duration, kinds *kindFlags) error {
	c, err := openBackend(ctx, "")
	if err != nil {
		return err
	}
	defer closeBackend(c)
	m, err := kinds.locker(c, name, holdOptions(ttl, label, owner))
	if err != nil {
		return err
	}

	// One receiver of the caught signals at a time: the wait for the lock,
	// then the command's supervisor.
	sigs, stopSignals := catchSignals()
	defer stopSignals()
	lctx, endWait := sigs.cancelOnSignal(ctx, 0)
	var l *dlock.Lease
	inspect := kinds.inspector(c, name)
	stopShow := showWait(fmt.Sprintf("lock %q", name), name, func(ctx context.Context) (string, error) { return holderNow(ctx, inspect) })
	switch {
	case noWait:
		tctx, cancel := context.WithTimeout(lctx, global.connectTimeout)
		l, err = m.TryLock(tctx)
		cancel()
	case wait > 0:
		// One try whatever --wait says: a --wait shorter than a round
		// trip (1us) gave up on a free lock without trying. The try has
		// --wait or --connect-timeout, whichever is longer (it had no
		// bound: 8 s on a store gone silent, with --wait 2s), and the
		// wait what is left of --wait.
		deadline := time.Now().Add(wait)
		tctx, cancel := context.WithTimeout(lctx, max(wait, global.connectTimeout))
		l, err = m.TryLock(tctx)
		cancel()
		if errors.Is(err, dlock.ErrNotAcquired) {
			wctx, cancel := context.WithDeadline(lctx, deadline)
			l, err = m.Lock(wctx)
			cancel()
		}
	default:
		l, err = m.Lock(lctx)
	}
	stopShow()
	if sig := endWait(); sig != nil {
		// A signal came while waiting, or just after the lock was taken:
		// the command is not started.
		if err == nil {
			_ = finalRelease(ctx, l.Unlock)
		}
		return &exitError{code: signalExitCode(sig), err: fmt.Errorf("lock %q: interrupted by %v before %s started", name, sig, argv[0])}
	}
	switch {
	case errors.Is(err, dlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		holder, ierr := heldBy(ctx, inspect)
		return notAcquired(fmt.Sprintf("lock %q not acquired", name), holder, ierr, noWait, wait, err)
	case err != nil:
		// Bad input, or a store that failed (or went silent) after Open:
		// the command never ran, which 1, a command's own failure, would
		// not tell a cron wrapper.
		return fail(exitUsage, "%v", err)
	}
	unlocked := false
	defer func() {
		if !unlocked { // a lost lease, or the command not started
			_ = finalRelease(ctx, l.Unlock)
		}
	}()

	res, err := superviseChild(childSpec{
		Argv:     argv,
		Env:      []string{"DLOCK_NAME=" + name, "DLOCK_TOKEN=" + strconv.FormatUint(l.Token(), 10)},
		PassURL:  passURL,
		Signals:  sigs,
		Stop:     l.Done(),
		Grace:    grace,
		Stopping: func() { reportStopping(fmt.Sprintf("lease on %q", name), name, argv[0], l.Err(), grace) },
	})
	if err != nil {
		return startError(argv, err)
	}
	if res.Stopped {
		return &exitError{code: exitLeaseLost, err: errors.New("")}
	}
	// The final unlock may learn that the lock was gone before the command
	// ended (force-released, or expired before the next renewal could tell):
	// the run was not protected to its end, which a cron wrapper must be
	// able to tell from a clean run.
	unlocked = true
	if err := finalRelease(ctx, l.Unlock); errors.Is(err, dlock.ErrLeaseLost) {
		reportLostAtUnlock(fmt.Sprintf("lease on %q", name), name, argv[0], res.Code, err)
		return &exitError{code: exitLeaseLost, err: errors.New("")}
	} else if err != nil {
		reportUnconfirmed(fmt.Sprintf("lease on %q", name), name, err)
	}
	if res.Code != 0 {
		return &exitError{code: res.Code, err: errors.New("")}
	}
	return nil
}

// noAnswer reports whether err says a request went unanswered: its ctx's
// deadline, or a network timeout of the store's client (memcachedlock's
// try on a silent server said "i/o timeout", and exited 3).
func noAnswer(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// finalRelease gives back a hold dlock run or elect is done with, bounded
// by --connect-timeout: after the command ended, against a store that went
// silent while it ran, dlock waited without end, deaf to SIGTERM (an
// adversary pass: pg, etcd, NATS); after a loss, a cut store's release
// took 17 s (pg). The store frees the hold at its TTL anyway. Its error is
// the release's.
func finalRelease(ctx context.Context, release func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), global.connectTimeout)
	defer cancel()
	return release(ctx)
}

// reportUnconfirmed says on stderr (as a JSON event with -o json) that the
// final release of the hold (what) on name got no answer: the store frees
// it at its TTL if the release did not land.
func reportUnconfirmed(what, name string, err error) {
	cause := strings.TrimPrefix(err.Error(), "dlock: ")
	report(struct {
		Event string `json:"event"`
		Name  string `json:"name"`
		Error string `json:"error"`
	}{"release_unconfirmed", name, cause},
		fmt.Sprintf("%s: release not confirmed (%s); the lock frees at its TTL if it did not land", what, cause))
}

// holdOptions are the options of the hold dlock run or elect takes: ttl,
// and the label and owner where given.
func holdOptions(ttl time.Duration, label, owner string) []dlock.Option {
	opts := []dlock.Option{dlock.WithTTL(ttl)}
	if label != "" {
		opts = append(opts, dlock.WithLabel(label))
	}
	if owner != "" {
		opts = append(opts, dlock.WithOwner(owner))
	}
	return opts
}

// reportStopping says on stderr (as a JSON event with -o json) that the
// hold (what: `lease on "x"`, `term in election "x"`) on name was lost
// with err and the command cmd is being stopped: the one report of the
// loss, the exit status (4) says the rest.
func reportStopping(what, name, cmd string, err error, grace time.Duration) {
	cause := strings.TrimPrefix(err.Error(), "dlock: ")
	report(struct {
		Event   string `json:"event"`
		Name    string `json:"name"`
		Error   string `json:"error"`
		GraceMs int64  `json:"grace_ms"`
	}{"lease_lost", name, cause, grace.Milliseconds()},
		fmt.Sprintf("%s lost (%s); stopping %s: SIGTERM, SIGKILL after %v", what, cause, cmd, grace))
}

// report says on stderr what happened: event as JSON with -o json, else
// text after "dlock: ".
func report(event any, text string) {
	if jsonOutput() {
		_ = json.NewEncoder(os.Stderr).Encode(event)
		return
	}
	fmt.Fprintf(os.Stderr, "dlock: %s\n", text)
}

// reportLostAtUnlock says on stderr (as a JSON event with -o json) that
// the lease on name was found lost when the command cmd had ended with
// status code.
func reportLostAtUnlock(what, name, cmd string, code int, err error) {
	cause := strings.TrimPrefix(err.Error(), "dlock: ")
	report(struct {
		Event      string `json:"event"`
		Name       string `json:"name"`
		Error      string `json:"error"`
		ChildState int    `json:"child_status"`
	}{"lease_lost_at_unlock", name, cause, code},
		fmt.Sprintf("%s was lost before %s ended (exit status %d), so it ran unprotected at the end: %s", what, cmd, code, cause))
}

// heldBy names the holder of a lock that was not acquired, as " (held by
// LABEL (owner ID), token N, T left)", or "" if the backend cannot say, with
// the inspection's error.
func heldBy(ctx context.Context, inspect func(context.Context) (dlock.Info, error)) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), global.connectTimeout)
	defer cancel()
	return holderNow(ctx, inspect)
}

// holderNow is heldBy within ctx.
func holderNow(ctx context.Context, inspect func(context.Context) (dlock.Info, error)) (string, error) {
	info, err := inspect(ctx)
	if err != nil || !info.Held {
		return "", err
	}
	return " (held by " + holdersText(info) + ")", nil
}

// notAcquired is the one-statement error of a lock or lead not won: what,
// who holds it (" (held by …)", "" if the store cannot say) and why the
// wait ended. The library's error, which says the same again, is kept only
// when the holder is unknown. A wait that ran out while the store did not
// answer the holder's inspection either (ierr) is a store gone silent, not
// a lock held: exit 2, as for an unreachable backend (it was 3, which a
// cron wrapper reads as "the lock was held").
func notAcquired(what, holder string, ierr error, noWait bool, wait time.Duration, err error) error {
	if ierr != nil && !errors.Is(ierr, dlock.ErrUnsupported) && noAnswer(err) {
		return fail(exitUsage, "%s: the store does not answer: %s", what, strings.TrimPrefix(ierr.Error(), "dlock: "))
	}
	why := "interrupted"
	switch {
	case noWait:
		why = "tried once (--no-wait)"
	case wait > 0 && errors.Is(err, context.DeadlineExceeded):
		why = fmt.Sprintf("--wait %v elapsed", wait)
	}
	if holder == "" {
		return fail(exitNotAcquired, "%s: %s: %s", what, why, strings.TrimPrefix(err.Error(), "dlock: "))
	}
	return fail(exitNotAcquired, "%s%s: %s", what, holder, why)
}
