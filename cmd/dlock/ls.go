package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

func lsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls [PREFIX]",
		Short: "List the locks held under a prefix: holder, kind, token, time left, waiters",
		Long: `ls lists every lock held now whose name starts with PREFIX (all locks
without one), in name order, with its holder's label, the kind of hold, the
fencing token, the time left on the lease and the waiters queued in the store.

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
			defer c.Close()
			infos, err := c.List(cmd.Context(), prefix)
			if err != nil {
				return fail(exitFailed, "%v", err)
			}
			if jsonOutput() {
				out := make([]lsJSON, 0, len(infos))
				for _, i := range infos {
					out = append(out, lsJSON{infoJSON: inspectJSON(i), Kind: kindOf(i)})
				}
				return printJSON(cmd.OutOrStdout(), out)
			}
			printLs(cmd.OutOrStdout(), infos)
			return nil
		},
	}
	return cmd
}

// lsJSON is one lock of `dlock ls -o json`: inspect's fields and the kind.
type lsJSON struct {
	infoJSON
	Kind string `json:"kind"`
}

// kindOf is the kind of a listed hold. Every hold the backends list today is
// a mutex's (exclusive); Info will say otherwise when it carries a kind.
func kindOf(dlock.Info) string { return "exclusive" }

// holderOf is what ls and top show as the holder: the label, or the owner id
// where the store keeps no label (database row and session locks).
func holderOf(i dlock.Info) string {
	switch {
	case i.Label != "":
		return i.Label
	case i.Owner != "":
		return i.Owner
	}
	return "-"
}

// left formats the time left on a lease; "-" when the store does not say.
func left(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond).String()
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\n", i.Name, holderOf(i), kindOf(i), i.Token, left(i.TTL), i.Waiters)
	}
	_ = tw.Flush()
}
