// Command dlock runs commands under distributed locks, inspects and clears
// locks, and reproduces the flash-sale experiment (dlock demo).
//
// The backend URL comes from --backend, --backend-file PATH (a file holding
// the URL) or the DLOCK_URL environment variable, for every subcommand. A
// URL on the command line is visible to every local user in the process
// list: dlock warns when one holds a password, and DLOCK_URL, --backend-file
// or the URL parameter password_file=PATH keep it off the command line.
//
// -o json makes every command print JSON (errors too, on stderr, as
// {"error": ..., "exit": N}).
//
// dlock run and the parent-death guarantee: on Linux the command dlock run
// starts runs in its own process group (unless stdin is a terminal), and a
// guard process between dlock and the command kills that group when dlock
// dies, even by kill -9, so neither the command nor the children it started
// run on without the lock's guard (with a terminal, only the command itself
// is killed). Forwarded signals go to that group. Other systems have no
// parent-death signal: there a command whose dlock was killed with SIGKILL
// runs on until it ends by itself. On every system, a
// dlock process that is stopped (SIGSTOP, a frozen VM or container) cannot
// renew: once the TTL passes the store gives the lock to someone else while
// the command still runs, unprotected, until dlock resumes, sees the loss
// and stops it. The command gets its fencing token in DLOCK_TOKEN so that
// its writes can be refused by a store that has seen a newer token.
//
// Exit status: 0 success; 1 the demo found an oversell, or a command failed;
// 2 bad usage, a bad or unreachable backend; 3 the lock was not acquired in
// time (dlock run); 4 the lease was lost while the command ran (dlock run);
// otherwise dlock run exits with its command's status.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	_ "github.com/dlock/dlock/etcdlock"
	_ "github.com/dlock/dlock/memcachedlock"
	_ "github.com/dlock/dlock/memlock"
	_ "github.com/dlock/dlock/mysqllock"
	_ "github.com/dlock/dlock/natslock"
	_ "github.com/dlock/dlock/pglock"
	_ "github.com/dlock/dlock/redislock"
	_ "github.com/dlock/dlock/redlock"
	_ "github.com/dlock/dlock/zklock"
)

// Exit statuses.
const (
	exitFailed      = 1
	exitUsage       = 2
	exitNotAcquired = 3
	exitLeaseLost   = 4
	// The command could not be started: not found (127) or not
	// executable (126), as env, timeout and nohup say.
	exitNotExecutable = 126
	exitNotFound      = 127
)

// exitError carries an exit status and a one-line message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// quietRedis drops go-redis's own log lines (pool dial retries): the
// command reports errors itself, in one line.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// commands are dlock's subcommands, in the order help lists them. Add a
// command with one line here.
func commands() []*cobra.Command {
	return []*cobra.Command{
		runCmd(),
		inspectCmd(),
		unlockCmd(),
		migrateCmd(),
		demoCmd(),
		versionCmd(),
		demoInstanceCmd(),
		electCmd(),
		lsCmd(),
		topCmd(),
	}
}

func main() {
	runGuardIfAsked() // dlock run's guard of its command (Linux), not a subcommand
	redis.SetLogger(quietRedis{})
	root := &cobra.Command{
		Use:           "dlock",
		Short:         "Distributed locks over Redis, etcd and more",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkDurations(cmd); err != nil {
				return err
			}
			return checkGlobalFlags()
		},
	}
	addGlobalFlags(root)
	root.AddCommand(commands()...)
	err := root.Execute()
	if err == nil {
		return
	}
	code := exitUsage // cobra's own errors are usage errors
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	msg := oneLine(err.Error())
	if msg != "" && !strings.HasPrefix(msg, "dlock: ") {
		msg = "dlock: " + msg
	}
	// No message: the status is the command's own, or its reason was
	// reported already (a lost lease); with -o json, a line on stderr would
	// mix into the command's own output.
	switch {
	case msg == "":
	case jsonOutput() || askedJSON(os.Args[1:]):
		_ = json.NewEncoder(os.Stderr).Encode(struct {
			Error string `json:"error"`
			Exit  int    `json:"exit"`
		}{msg, code})
	default:
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(code)
}

// oneLine folds a multi-line error (several hosts' dial errors) into one.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// askedJSON reports whether args (dlock's) ask for -o json: cobra reports
// some errors (an unknown subcommand) before it has parsed the flags.
func askedJSON(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "-o" || a == "--output":
			if i+1 < len(args) && args[i+1] == "json" {
				return true
			}
		case a == "-ojson" || a == "-o=json" || a == "--output=json":
			return true
		}
	}
	return false
}
