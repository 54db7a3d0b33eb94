package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

func inspectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect NAME",
		Short: "Show who holds a lock, its hold count, fencing token and time left, and its readers, writer and permits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := openBackend(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer closeBackend(c)
			var info dlock.Info
			var kinds kindsJSON
			if err := within(cmd.Context(), func(ctx context.Context) (err error) {
				if info, err = c.Inspect(ctx, args[0]); err != nil {
					return err
				}
				kinds, err = inspectKinds(ctx, c, args[0])
				return err
			}); err != nil {
				return opFailed(err)
			}
			if jsonOutput() {
				j := inspectJSON(info)
				j.kindsJSON = kinds
				return printJSON(cmd.OutOrStdout(), j)
			}
			printInfo(cmd, info, kinds.RWMutex != nil || kinds.Semaphore != nil)
			printKinds(cmd.OutOrStdout(), args[0], kinds)
			return nil
		},
	}
	return cmd
}

type infoJSON struct {
	Name    string   `json:"name"`
	Held    bool     `json:"held"`
	Owner   string   `json:"owner"`
	Label   string   `json:"label"`
	Holds   int      `json:"holds"`
	Token   uint64   `json:"token"`
	TTLMs   int64    `json:"ttl_ms"`
	Waiters int      `json:"waiters"`
	Notes   []string `json:"notes"`
	kindsJSON
}

func inspectJSON(i dlock.Info) infoJSON {
	if i.Notes == nil {
		i.Notes = []string{}
	}
	return infoJSON{Name: i.Name, Held: i.Held, Owner: i.Owner, Label: i.Label, Holds: i.Holds, Token: i.Token,
		TTLMs: i.TTL.Milliseconds(), Waiters: i.Waiters, Notes: i.Notes}
}

// printInfo prints the mutex's line of inspect. With kinds (the name's
// read-write lock or semaphore follow), it says "(mutex)", so that a free
// mutex does not read as the whole name being free.
func printInfo(cmd *cobra.Command, i dlock.Info, kinds bool) {
	w := cmd.OutOrStdout()
	name := esc(i.Name)
	if kinds {
		name += " (mutex)"
	}
	if !i.Held {
		fmt.Fprintf(w, "%s: free\n", name)
	} else {
		fmt.Fprintf(w, "%s: held by %s (holds %d, %s %d, %s, %d waiting)\n",
			name, esc(holderName(i)), i.Holds, tokenWord(i), i.Token, timeLeft(i.TTL), i.Waiters)
	}
	for _, n := range i.Notes {
		fmt.Fprintln(w, "note:", esc(n))
	}
}

func migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create what the backend's store needs: an SQL backend's tables, Redis's function library (safe to run again)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := openBackend(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer closeBackend(c)
			res := struct {
				Backend   string `json:"backend"`
				Tables    bool   `json:"tables"`              // the backend keeps tables, and they are ready
				Functions bool   `json:"functions,omitempty"` // the backend runs Redis Functions, and they are loaded
			}{Backend: c.Backend()}
			redis := c.Backend() == "redis" || c.Backend() == "redlock"
			if err := within(cmd.Context(), c.Migrate); err != nil && !errors.Is(err, dlock.ErrUnsupported) {
				return opFailed(err)
			} else if redis {
				res.Functions = err == nil
			} else {
				res.Tables = err == nil
			}
			switch {
			case jsonOutput():
				return printJSON(cmd.OutOrStdout(), res)
			case res.Tables:
				fmt.Fprintf(cmd.OutOrStdout(), "%s: tables ready\n", c.Backend())
			case res.Functions:
				fmt.Fprintf(cmd.OutOrStdout(), "%s: dlock's function library loaded (or scripts=eval: nothing to load)\n", c.Backend())
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "%s backend keeps no tables: nothing to do\n", c.Backend())
			}
			return nil
		},
	}
}

func unlockCmd() *cobra.Command {
	var force, yes bool
	var kind string
	cmd := &cobra.Command{
		Use:   "unlock --force [--kind mutex|rw|sem] NAME",
		Short: "Release a lock whoever holds it (for operators)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !force {
				return fail(exitUsage, "unlock releases another owner's lock: say --force")
			}
			c, err := openBackend(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer closeBackend(c)
			name := args[0]
			if kind != "mutex" {
				return unlockKind(cmd, c, name, kind, yes)
			}
			inspect := func(ctx context.Context) (dlock.Info, error) { return c.Inspect(ctx, name) }
			info, err := ask(cmd.Context(), inspect)
			if err != nil {
				return opFailed(err)
			}
			res := struct {
				Name     string   `json:"name"`
				Released bool     `json:"released"` // false: it was not held
				Holder   infoJSON `json:"holder"`   // what inspect showed before
			}{Name: name, Holder: inspectJSON(info)}
			gone := false // released or expired while the operator answered
			if info.Held {
				if !yes && jsonOutput() {
					return errMustConfirm
				}
				if !yes {
					fmt.Fprintf(cmd.ErrOrStderr(), "Force-release %q held by %s? [y/N] ", name, holderText(info))
					answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
					if !strings.HasSuffix(answer, "\n") {
						fmt.Fprintln(cmd.ErrOrStderr()) // end the question's line (EOF): what follows starts its own
					}
					if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
						return fail(exitFailed, "not released")
					}
					// The answer may come long after the question: release
					// only the holder that was shown, not whoever holds the
					// lock now.
					now, err := ask(cmd.Context(), inspect)
					if err != nil {
						return opFailed(err)
					}
					// The notes name what the owner and token cannot: the
					// connection or node that holds it (MySQL session mode's
					// GET_LOCK, PostgreSQL's advisory lock, ZooKeeper's node).
					if !now.Held || now.Owner != info.Owner || now.Token != info.Token || !slices.Equal(now.Notes, info.Notes) {
						if now.Held {
							return fail(exitFailed, "%s: not released: the holder changed while you answered (now %s); run unlock again", esc(name), holderText(now))
						}
						info.Held, gone = false, true
					}
				}
			}
			if info.Held {
				// Only the holder shown: the force names its token, so a
				// holder granted since is kept. A holder without one (a
				// foreign holder the backend knows no token of) is released
				// whoever holds the lock then.
				var shown []uint64
				if info.Token != 0 {
					shown = []uint64{info.Token}
				}
				if err := within(cmd.Context(), func(ctx context.Context) error {
					return c.ForceUnlock(ctx, name, shown...)
				}); err != nil {
					return opFailed(err)
				}
				res.Released = true
			} else if err := within(cmd.Context(), func(ctx context.Context) error {
				return kindHeld(ctx, c, name)
			}); err != nil {
				return err
			}
			switch {
			case jsonOutput():
				return printJSON(cmd.OutOrStdout(), res)
			case res.Released:
				fmt.Fprintf(cmd.OutOrStdout(), "%s: released (holder %s, unless it had released it already, finds out at its next renewal)\n", esc(name), esc(info.Owner))
			case gone:
				fmt.Fprintf(cmd.OutOrStdout(), "%s: not held (released while you answered)\n", esc(name))
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "%s: not held\n", esc(name))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "release whoever holds the lock")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (required with -o json when the lock is held)")
	cmd.Flags().StringVar(&kind, "kind", "mutex", "what of NAME to release: its mutex, its read-write lock (rw: every reader and the writer) or its semaphore (sem: every permit)")
	return cmd
}

// holderText names a lock's holder: its label and owner, token and time
// left, as far as the backend tells them.
func holderText(i dlock.Info) string {
	return fmt.Sprintf("%s, %s %d, %s", esc(holderName(i)), tokenWord(i), i.Token, timeLeft(i.TTL))
}

// tokenWord names a hold's fencing token: an election's is its term.
func tokenWord(i dlock.Info) string {
	if i.Election {
		return "term"
	}
	return "token"
}

// holderName names a lock's holder: "LABEL (owner ID)", the label or the
// owner id alone, or what a foreign holder (etcdctl lock) is. An election's
// is its leader's value: the owner id is the candidate's internal one,
// which no operator chose or knows.
func holderName(i dlock.Info) string {
	switch {
	case i.Election && i.Label == "":
		return "an election's leader (value empty)"
	case i.Election:
		return "election leader " + i.Label
	case i.Label != "" && i.Owner != "":
		return i.Label + " (owner " + i.Owner + ")"
	case i.Label != "":
		return i.Label
	case i.Owner != "":
		return i.Owner
	}
	return "an owner the backend does not name"
}

// timeLeft says the time left on a lease, or that the store does not tell
// it (ZooKeeper: a session's, not the hold's), as ls's "-" does.
func timeLeft(d time.Duration) string {
	if d <= 0 {
		return "time left unknown"
	}
	return d.Round(time.Millisecond).String() + " left"
}
