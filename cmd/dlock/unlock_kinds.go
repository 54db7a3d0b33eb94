package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

// unlockKind is `dlock unlock --force --kind rw|sem NAME`: it drops every
// hold of name's read-write lock or semaphore, after showing them and, unless
// yes, asking. Only the holds shown are dropped: the force names their
// tokens, so a hold granted after dlock looked is kept.
func unlockKind(cmd *cobra.Command, c *dlock.Client, name, kind string, yes bool) error {
	var (
		inspect func(context.Context) (dlock.Info, error)
		force   func(context.Context, ...uint64) error
		what    string
	)
	switch kind {
	case "rw":
		rw := c.RWMutex(name)
		inspect, force, what = rw.Inspect, rw.ForceUnlock, "read-write lock"
	case "sem":
		s := c.Semaphore(name, 1) // its permit count plays no part in reading or dropping it
		inspect, force, what = s.Inspect, s.ForceUnlock, "semaphore"
	default:
		return fail(exitUsage, "--kind is mutex, rw or sem, not %q", kind)
	}
	info, err := ask(cmd.Context(), inspect)
	if err != nil {
		return opFailed(err)
	}
	res := struct {
		Name     string        `json:"name"`
		Kind     string        `json:"kind"`
		Released bool          `json:"released"` // false: it was not held
		Holders  *kindInfoJSON `json:"holders"`  // what inspect showed before
	}{Name: name, Kind: kind, Holders: kindInfoOf(info)}
	held := len(info.Holders) > 0
	if held && !yes && jsonOutput() {
		return errMustConfirm
	}
	if held && !yes {
		fmt.Fprintf(cmd.ErrOrStderr(), "Force-release the %s %q held by %s? [y/N] ", what, name, whoAll(holdersOf(res.Holders)))
		answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		if !strings.HasSuffix(answer, "\n") {
			fmt.Fprintln(cmd.ErrOrStderr())
		}
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return fail(exitFailed, "not released")
		}
		// Drop only the holds that were shown, not whoever holds it now.
		now, err := ask(cmd.Context(), inspect)
		if err != nil {
			return opFailed(err)
		}
		if len(now.Holders) > 0 && !sameHolds(now.Holders, info.Holders) {
			return fail(exitFailed, "%s: not released: the holders changed while you answered (now %s); run unlock again",
				esc(name), whoAll(holdersOf(kindInfoOf(now))))
		}
		held = len(now.Holders) > 0
	}
	if held {
		shown := make([]uint64, len(info.Holders))
		for i, h := range info.Holders {
			shown[i] = h.Token
		}
		if err := within(cmd.Context(), func(ctx context.Context) error {
			return force(ctx, shown...)
		}); err != nil {
			return opFailed(err)
		}
		res.Released = true
	}
	switch {
	case jsonOutput():
		return printJSON(cmd.OutOrStdout(), res)
	case res.Released:
		holds := "holds"
		if len(info.Holders) == 1 {
			holds = "hold"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s (%s): released the %d %s shown, where still held (their holders find out at their next renewal)\n",
			esc(name), what, len(info.Holders), holds)
	default:
		fmt.Fprintf(cmd.OutOrStdout(), "%s (%s): not held\n", esc(name), what)
	}
	return nil
}

// holdersOf lists a kind's holders: the writer or the readers, or the
// permit holders.
func holdersOf(k *kindInfoJSON) []holderJSON {
	hs := slices.Clone(k.Holders)
	if k.Writer != nil {
		hs = append(hs, *k.Writer)
	}
	return append(hs, k.Readers...)
}

// sameHolds reports whether a and b are the same holds: owners and tokens.
func sameHolds(a, b []dlock.Holder) bool {
	key := func(hs []dlock.Holder) []string {
		out := make([]string, len(hs))
		for i, h := range hs {
			out[i] = fmt.Sprintf("%s\x00%d", h.Owner, h.Token)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
