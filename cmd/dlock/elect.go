package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

func electCmd() *cobra.Command {
	var (
		label            string
		ttl, wait, grace time.Duration
		observe          bool
	)
	cmd := &cobra.Command{
		Use:   "elect [flags] NAME VALUE -- CMD [ARGS...] | elect --observe NAME",
		Short: "Run a command only while leading an election, or print its leaders",
		Long: `Elect campaigns in the election NAME with VALUE and, once leading, runs CMD with
DLOCK_NAME, DLOCK_VALUE and DLOCK_TOKEN (the term, a fencing token) in its
environment, forwards signals to it, and resigns when it exits. If the term
is lost while CMD runs, CMD gets SIGTERM, then SIGKILL after --grace, as with
dlock run. On etcd and ZooKeeper the election is that of etcdctl elect and
Curator's LeaderLatch.

Exit status: CMD's own (128+N if signal N killed it); 3 if the lead was
not won (--wait elapsed); 4 if the term was lost, while CMD ran or found
when resigning; 2 for a bad or unreachable backend, one that failed before
CMD started, or bad flags; 128+N if
signal N came while campaigning, before CMD started (as dlock run).

With --observe, elect prints each change of leader (one line each, or one
JSON object per line with -o json) until interrupted.

  DLOCK_URL=etcd://127.0.0.1:2379 dlock elect billing/scheduler host-a:8080 -- ./scheduler
  DLOCK_URL=etcd://127.0.0.1:2379 dlock elect --observe billing/scheduler -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if observe {
				if len(args) != 1 {
					return fail(exitUsage, "usage: dlock elect --observe NAME")
				}
				return observeLeaders(cmd, args[0])
			}
			if len(args) < 3 || cmd.ArgsLenAtDash() != 2 {
				return fail(exitUsage, "usage: dlock elect [flags] NAME VALUE -- CMD [ARGS...]")
			}
			return runElected(cmd.Context(), args[0], args[1], args[2:], ttl, wait, label, grace)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", dlock.DefaultTTL, "term TTL: how long a dead leader keeps the lead; renewed every TTL/3")
	cmd.Flags().DurationVar(&wait, "wait", 0, "how long to campaign (0: until leading)")
	cmd.Flags().StringVar(&label, "label", "", "holder label, where the store keeps one apart from the value (default: host:pid)")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the term is lost")
	addPassURLFlag(cmd)
	cmd.Flags().BoolVar(&observe, "observe", false, "print each change of leader instead of campaigning")
	return cmd
}

func runElected(ctx context.Context, name, value string, argv []string, ttl, wait time.Duration, label string, grace time.Duration) error {
	c, err := openBackend(ctx, "")
	if err != nil {
		return err
	}
	defer closeBackend(c)
	e := c.Election(name, holdOptions(ttl, label, "")...)

	// One receiver of the caught signals at a time: the campaign, then the
	// command's supervisor (as dlock run).
	sigs, stopSignals := catchSignals()
	defer stopSignals()
	cctx, endWait := sigs.cancelOnSignal(ctx, wait)
	stopShow := showWait(fmt.Sprintf("the lead of election %q", name), name, func(ctx context.Context) (string, error) { return leaderNow(ctx, e) })
	term, err := e.Campaign(cctx, value)
	stopShow()
	if sig := endWait(); sig != nil {
		if err == nil {
			_ = finalRelease(ctx, term.Resign)
		}
		return &exitError{code: signalExitCode(sig), err: fmt.Errorf("election %q: interrupted by %v before %s started", name, sig, argv[0])}
	}
	switch {
	case errors.Is(err, dlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		leader, lerr := ledBy(ctx, e)
		return notAcquired(fmt.Sprintf("election %q not won", name), leader, lerr, false, wait, err)
	case err != nil: // bad input, or a store that failed: CMD never ran (as dlock run)
		return fail(exitUsage, "%v", err)
	}
	resigned := false
	defer func() {
		if !resigned {
			_ = finalRelease(ctx, term.Resign)
		}
	}()
	what := fmt.Sprintf("term in election %q", name)
	res, err := superviseChild(childSpec{
		Argv:     argv,
		Env:      []string{"DLOCK_NAME=" + name, "DLOCK_VALUE=" + value, "DLOCK_TOKEN=" + strconv.FormatUint(term.Token(), 10)},
		PassURL:  passURL,
		Signals:  sigs,
		Stop:     term.Done(),
		Grace:    grace,
		Stopping: func() { reportStopping(what, name, argv[0], term.Err(), grace) },
	})
	if err != nil {
		return startError(argv, err)
	}
	if res.Stopped {
		return &exitError{code: exitLeaseLost, err: errors.New("")}
	}
	// As dlock run's final unlock: a term lost before the command ended
	// (its lead force-released, or expired before a renewal could tell)
	// did not protect the command to its end, and the exit status says so.
	resigned = true
	if err := finalRelease(ctx, term.Resign); errors.Is(err, dlock.ErrLeaseLost) {
		reportLostAtUnlock(what, name, argv[0], res.Code, err)
		return &exitError{code: exitLeaseLost, err: errors.New("")}
	} else if err != nil {
		reportUnconfirmed(what, name, err)
	}
	if res.Code != 0 {
		return &exitError{code: res.Code, err: errors.New("")}
	}
	return nil
}

type leaderJSON struct {
	Name  string `json:"name"`
	Term  uint64 `json:"term"`
	Value string `json:"value"`
	Label string `json:"label,omitempty"`
}

// observeLeaders prints each change of leader until interrupted.
func observeLeaders(cmd *cobra.Command, name string) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := openBackend(ctx, "")
	if err != nil {
		return err
	}
	defer closeBackend(c)
	out := cmd.OutOrStdout()
	enc := json.NewEncoder(out)
	for l, err := range c.Election(name).Observe(ctx) {
		switch {
		case errors.Is(err, dlock.ErrUnsupported), errors.Is(err, dlock.ErrInvalidName):
			return fail(exitUsage, "%v", err)
		case err != nil:
			reportObserveError(name, err)
		case jsonOutput():
			if err := enc.Encode(leaderJSON{Name: name, Term: l.Term, Value: l.Value, Label: l.Label}); err != nil {
				return fail(exitFailed, "%v", err)
			}
		default:
			fmt.Fprintf(out, "term %d: %s\n", l.Term, esc(l.Value))
		}
	}
	return nil
}

// ledBy names the leader of an election not won, as " (led by VALUE, term
// N)", or "" if there is none or the store cannot say, with the store's
// error (none for no leader).
func ledBy(ctx context.Context, e *dlock.Election) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), global.connectTimeout)
	defer cancel()
	return leaderNow(ctx, e)
}

// leaderNow is ledBy within ctx.
func leaderNow(ctx context.Context, e *dlock.Election) (string, error) {
	l, err := e.Leader(ctx)
	if errors.Is(err, dlock.ErrNoLeader) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(" (led by %s, term %d)", esc(l.Value), l.Term), nil
}

// reportObserveError says on stderr (as a JSON event with -o json) that a
// read of the election name failed; elect --observe goes on.
func reportObserveError(name string, err error) {
	cause := strings.TrimPrefix(err.Error(), "dlock: ")
	report(struct {
		Event string `json:"event"`
		Name  string `json:"name"`
		Error string `json:"error"`
	}{"observe_error", name, cause}, cause)
}
