package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/spf13/cobra"
)

func lsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls [PREFIX]",
		Short: "List the locks held under a prefix: holder, kind, token, time left, waiters",
		Long: `ls lists every lock held now whose name starts with PREFIX (all locks
without one), in name order, with its holder's label, the kind of hold, the
fencing token, the time left on the lease and the waiters queued in the store.

Every kind is listed: mutexes (KIND exclusive), read-write locks (rw-readers:N
with the latest reader as HOLDER and "+N-1" others, or rw-writer), semaphores
(semaphore:USED/TOTAL permits) and elections (election: HOLDER is the
leader's value, TOKEN its term). A name's mutex, read-write lock and
semaphore are separate locks, listed in that order. -o json adds the holds:
"rwmutex" (writer, readers), "semaphore" (permits, holders) or "election"
(leader, term).

Redis (single, Sentinel, Cluster), etcd, ZooKeeper, PostgreSQL, MySQL/MariaDB
and mem can list; Redlock and Memcached cannot, and say why.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			c, err := openBackend(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer closeBackend(c)
			var infos []dlock.Info
			if err := within(cmd.Context(), func(ctx context.Context) (err error) {
				infos, err = c.List(ctx, prefix)
				return err
			}); errors.Is(err, dlock.ErrUnsupported) {
				return fail(exitFailed, "%v", err) // the backend cannot list (Redlock, Memcached): the operation's failure, as always
			} else if err != nil {
				return opFailed(err)
			}
			if jsonOutput() {
				return printJSON(cmd.OutOrStdout(), lsJSONOf(infos))
			}
			printLs(cmd.OutOrStdout(), infos)
			return nil
		},
	}
	return cmd
}

// lsJSON is one lock of `dlock ls -o json`: inspect's fields, the kind
// (kindOf), and the holds of a read-write lock (rwmutex), semaphore
// (semaphore) or the term of an election (election).
type lsJSON struct {
	infoJSON
	Kind     string        `json:"kind"`
	Election *electionJSON `json:"election"`
}

// electionJSON is an election's leader in `dlock ls -o json`.
type electionJSON struct {
	Leader string `json:"leader"` // the leader's value
	Term   uint64 `json:"term"`
}

func lsJSONOf(infos []dlock.Info) []lsJSON {
	out := make([]lsJSON, 0, len(infos))
	for _, i := range infos {
		j := lsJSON{infoJSON: inspectJSON(i), Kind: kindOf(i)}
		switch {
		case i.Election:
			j.Election = &electionJSON{Leader: i.Label, Term: i.Token}
		case i.Kind == dlock.KindPermit:
			j.Semaphore = kindInfoOf(i)
		case i.Kind == dlock.KindShared || i.Kind == dlock.KindWrite:
			j.RWMutex = kindInfoOf(i)
		}
		out = append(out, j)
	}
	return out
}

// kindOf is the kind of a listed hold, as ls and top show it: "exclusive"
// (a Mutex), "election" (a term; the holder is the leader's value, the
// token the term), "rw-readers:N" (a read-write lock's N readers),
// "rw-writer", or "semaphore:USED/TOTAL" (permits).
func kindOf(i dlock.Info) string {
	switch {
	case i.Election:
		return "election"
	case i.Kind == dlock.KindWrite:
		return "rw-writer"
	case i.Kind == dlock.KindShared:
		return fmt.Sprintf("rw-readers:%d", len(i.Holders))
	case i.Kind == dlock.KindPermit:
		total := "?"
		if i.Limit > 0 {
			total = strconv.Itoa(i.Limit)
		}
		return fmt.Sprintf("semaphore:%d/%s", len(i.Holders), total)
	}
	return "exclusive"
}

// holderOf is what ls and top show as the holder: the label, or the owner id
// where the store keeps no label (database row and session locks), with
// "+N" for the other holders of a read-write lock or semaphore.
func holderOf(i dlock.Info) string {
	who := "-"
	switch {
	case i.Label != "":
		who = i.Label
	case i.Owner != "":
		who = i.Owner
	}
	who = esc(who)
	if n := len(i.Holders); n > 1 {
		who += fmt.Sprintf(" +%d", n-1)
	}
	return who
}

// left formats the time left on a lease; "-" when the store does not say.
func left(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	if d < time.Minute { // one precision for every row: 8.1s, 24.0s
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

func printLs(w io.Writer, infos []dlock.Info) {
	if len(infos) == 0 {
		fmt.Fprintln(w, "no locks held")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOLDER\tKIND\tTOKEN\tLEFT\tWAITERS")
	for _, i := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", esc(i.Name), holderOf(i), kindOf(i), i.Token, left(i.TTL), waitersOf(i))
	}
	_ = tw.Flush()
	printUncounted(w, infos)
}

// waitersOf is the WAITERS column: the count, or "—" where the store keeps
// no record of waiters to count (printUncounted says why).
func waitersOf(i dlock.Info) string {
	for _, n := range i.Notes {
		if driver.IsWaitersUncounted(n) {
			return "—"
		}
	}
	return strconv.Itoa(i.Waiters)
}

// printUncounted explains a "—" under WAITERS, once per reason.
func printUncounted(w io.Writer, infos []dlock.Info) {
	seen := map[string]bool{}
	for _, i := range infos {
		for _, n := range i.Notes {
			if driver.IsWaitersUncounted(n) && !seen[n] {
				seen[n] = true
				fmt.Fprintf(w, "WAITERS —: %s\n", esc(n))
			}
		}
	}
}
