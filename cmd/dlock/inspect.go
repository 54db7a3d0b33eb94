package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

func inspectCmd() *cobra.Command {
	var backend, output string
	cmd := &cobra.Command{
		Use:   "inspect NAME",
		Short: "Show who holds a lock, its hold count, fencing token and time left, and its readers, writer and permits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fail(exitUsage, "-o must be text or json")
			}
			c, err := openBackend(cmd.Context(), backend)
			if err != nil {
				return err
			}
			defer c.Close()
			info, err := c.Inspect(cmd.Context(), args[0])
			if err != nil {
				return fail(exitFailed, "%v", err)
			}
			kinds, err := inspectKinds(cmd.Context(), c, args[0])
			if err != nil {
				return fail(exitFailed, "%v", err)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				j := inspectJSON(info)
				j.kindsJSON = kinds
				return enc.Encode(j)
			}
			printInfo(cmd, info)
			printKinds(cmd.OutOrStdout(), args[0], kinds)
			return nil
		},
	}
	addBackendFlag(cmd, &backend)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

type infoJSON struct {
	Name    string   `json:"name"`
	Held    bool     `json:"held"`
	Owner   string   `json:"owner,omitempty"`
	Label   string   `json:"label,omitempty"`
	Holds   int      `json:"holds"`
	Token   uint64   `json:"token"`
	TTLMs   int64    `json:"ttl_ms"`
	Waiters int      `json:"waiters"`
	Notes   []string `json:"notes,omitempty"`
	kindsJSON
}

func inspectJSON(i dlock.Info) infoJSON {
	return infoJSON{Name: i.Name, Held: i.Held, Owner: i.Owner, Label: i.Label, Holds: i.Holds, Token: i.Token,
		TTLMs: i.TTL.Milliseconds(), Waiters: i.Waiters, Notes: i.Notes}
}

func printInfo(cmd *cobra.Command, i dlock.Info) {
	w := cmd.OutOrStdout()
	if !i.Held {
		fmt.Fprintf(w, "%s: free\n", i.Name)
	} else {
		who := i.Owner
		if i.Label != "" {
			who = i.Label + " (owner " + i.Owner + ")"
		}
		fmt.Fprintf(w, "%s: held by %s (holds %d, token %d, %v left, %d waiting)\n",
			i.Name, who, i.Holds, i.Token, i.TTL.Round(time.Millisecond), i.Waiters)
	}
	for _, n := range i.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func migrateCmd() *cobra.Command {
	var backend string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create the tables an SQL backend needs (safe to run again)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := openBackend(cmd.Context(), backend)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.Migrate(cmd.Context()); errors.Is(err, dlock.ErrUnsupported) {
				fmt.Fprintf(cmd.OutOrStdout(), "%s backend keeps no tables: nothing to do\n", c.Backend())
				return nil
			} else if err != nil {
				return fail(exitFailed, "%v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: tables ready\n", c.Backend())
			return nil
		},
	}
	addBackendFlag(cmd, &backend)
	return cmd
}

func unlockCmd() *cobra.Command {
	var backend string
	var force, yes bool
	cmd := &cobra.Command{
		Use:   "unlock --force NAME",
		Short: "Release a lock whoever holds it (for operators)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !force {
				return fail(exitUsage, "unlock releases another owner's lock: say --force")
			}
			c, err := openBackend(cmd.Context(), backend)
			if err != nil {
				return err
			}
			defer c.Close()
			name := args[0]
			info, err := c.Inspect(cmd.Context(), name)
			if err != nil {
				return fail(exitFailed, "%v", err)
			}
			if !info.Held {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: not held\n", name)
				return nil
			}
			if !yes {
				fmt.Fprintf(cmd.ErrOrStderr(), "Force-release %q held by %s %s (token %d)? [y/N] ", name, info.Label, info.Owner, info.Token)
				answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					return fail(exitFailed, "not released")
				}
			}
			if err := c.ForceUnlock(cmd.Context(), name); err != nil {
				return fail(exitFailed, "%v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: released (holder %s will find out at its next renewal)\n", name, info.Owner)
			return nil
		},
	}
	addBackendFlag(cmd, &backend)
	cmd.Flags().BoolVar(&force, "force", false, "release whoever holds the lock")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}
