// Command dlock runs commands under distributed locks, inspects and clears
// locks, and reproduces the flash-sale experiment (dlock demo).
//
// The backend URL comes from --backend or the DLOCK_URL environment variable.
//
// Exit status: 0 success; 1 the demo found an oversell, or a command failed;
// 2 bad usage, a bad or unreachable backend; 3 the lock was not acquired in
// time (dlock run); 4 the lease was lost while the command ran (dlock run);
// otherwise dlock run exits with its command's status.
package main

import (
	"context"
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

func main() {
	redis.SetLogger(quietRedis{})
	root := &cobra.Command{
		Use:           "dlock",
		Short:         "Distributed locks over Redis, etcd and more",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(runCmd(), inspectCmd(), unlockCmd(), migrateCmd(), demoCmd(), demoInstanceCmd(), electCmd())
	err := root.Execute()
	if err == nil {
		return
	}
	code := exitUsage // cobra's own errors are usage errors
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := err.Error(); msg != "" {
		if !strings.HasPrefix(msg, "dlock: ") {
			msg = "dlock: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(code)
}
