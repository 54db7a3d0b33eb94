package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/smallfile"
	"github.com/dlock/dlock/internal/urlsecret"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// global holds the root command's persistent flags, shared by every
// subcommand.
var global struct {
	backend        string        // --backend
	backendFile    string        // --backend-file
	output         string        // -o
	connectTimeout time.Duration // --connect-timeout
	requestTimeout time.Duration // --request-timeout
	verbose        int           // -v (warnings), -vv (debug)
}

func addGlobalFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&global.backend, "backend", "", "backend URL (default $DLOCK_URL), e.g. redis://127.0.0.1:6379 or etcd://127.0.0.1:2379; a password here is visible in the process list: prefer DLOCK_URL, --backend-file or password_file=")
	f.StringVar(&global.backendFile, "backend-file", "", "read the backend URL from this file")
	f.StringVarP(&global.output, "output", "o", "text", "output format: text or json")
	f.DurationVar(&global.connectTimeout, "connect-timeout", 5*time.Second, "how long to wait for the backend to answer when connecting")
	f.DurationVar(&global.requestTimeout, "request-timeout", 10*time.Second, "how long inspect, ls, unlock and migrate wait for the backend's answers, each step apart (reading; releasing)")
	f.CountVarP(&global.verbose, "verbose", "v", "log the client's warnings (renewal trouble, retries) on stderr; -vv adds debug lines (every retry of every request)")
}

func checkGlobalFlags() error {
	if global.output != "text" && global.output != "json" {
		return fail(exitUsage, "-o must be text or json")
	}
	if global.connectTimeout <= 0 {
		return fail(exitUsage, "--connect-timeout must be positive")
	}
	if global.requestTimeout <= 0 {
		return fail(exitUsage, "--request-timeout must be positive")
	}
	return nil
}

// checkDurations refuses a negative value of any duration flag of cmd
// (--wait -1s waited for ever, --grace -1s killed at once): no flag gives
// a negative duration a meaning.
func checkDurations(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err == nil && f.Value.Type() == "duration" {
			if v, perr := time.ParseDuration(f.Value.String()); perr == nil && v < 0 {
				err = fail(exitUsage, "--%s must not be negative", f.Name)
			}
		}
	})
	return err
}

// jsonOutput reports whether -o json was given.
func jsonOutput() bool { return global.output == "json" }

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// backendURL returns the backend URL from --backend, --backend-file or
// $DLOCK_URL, in that order, and warns on stderr when a URL given on the
// command line holds a password.
func backendURL(ctx context.Context) (string, error) {
	switch {
	case global.backend != "" && global.backendFile != "":
		return "", fail(exitUsage, "give --backend or --backend-file, not both")
	case global.backend != "":
		warnArgvSecret("--backend", global.backend)
		warnPasswordFile(global.backend)
		return global.backend, nil
	case global.backendFile != "":
		rctx, cancel := context.WithTimeout(ctx, global.connectTimeout) // a silent pipe: an error, not a hang
		defer cancel()
		b, err := smallfile.Read(rctx, global.backendFile, smallfile.MaxSecret) // a wrong path may be /dev/zero
		if err != nil {
			return "", fail(exitUsage, "--backend-file %s: %v", global.backendFile, err)
		}
		u := strings.TrimSpace(string(b))
		if u == "" {
			return "", fail(exitUsage, "--backend-file %s is empty", global.backendFile)
		}
		if urlsecret.HasSecret(u) {
			warnReadable("--backend-file", global.backendFile)
		}
		warnPasswordFile(u)
		return u, nil
	}
	if u := os.Getenv("DLOCK_URL"); u != "" {
		warnPasswordFile(u)
		return u, nil
	}
	return "", fail(exitUsage, "no backend: give --backend URL, --backend-file PATH or set DLOCK_URL")
}

// warnArgvSecret warns once on stderr when a URL from the command line holds
// a password, which every local user can read in the process list.
func warnArgvSecret(flag, rawURL string) {
	if !urlsecret.HasSecret(rawURL) {
		return
	}
	what, param := "a password", "password_file"
	switch urlsecret.Kind(rawURL) {
	case "seed":
		what, param = "an NKey seed", ""
		if scheme, _, _ := strings.Cut(strings.ToLower(rawURL), "://"); scheme == "nats" || scheme == "tls" {
			param = "nkey" // other stores read no seed file
		}
	case "token":
		what, param = "a token", "token_file"
	case "hash":
		what, param = "an acl digest hash", "" // no file holds one
	}
	// Only advice the flag can follow (re-test passes): DLOCK_URL and
	// --backend-file stand for --backend, DLOCK_DEMO_BACKENDS for --also.
	var instead []string
	switch flag {
	case "--backend":
		instead = append(instead, "DLOCK_URL", "--backend-file PATH")
	case "--also":
		instead = append(instead, "DLOCK_DEMO_BACKENDS")
	}
	if param != "" {
		instead = append(instead, param+"=PATH in the URL")
	}
	advice := ""
	switch n := len(instead); n {
	case 0:
	case 1:
		advice = "; use " + instead[0]
	default:
		advice = "; use " + strings.Join(instead[:n-1], ", ") + " or " + instead[n-1]
	}
	warn(fmt.Sprintf("the %s URL holds %s, which every local user can read in the process list%s", flag, what, advice))
}

// warnReadable warns on stderr when the file at path, which holds a
// secret, is readable by every user of the machine (the README asks for
// mode 0600).
func warnReadable(what, path string) {
	if smallfile.OthersCanRead(path) {
		warn(fmt.Sprintf("%s %s holds a password and every local user can read it: chmod 600 it", what, path))
	}
}

// warnPasswordFile applies warnReadable to the password_file= of rawURL,
// if it has one.
func warnPasswordFile(rawURL string) {
	if i := strings.IndexByte(rawURL, '?'); i >= 0 {
		if q, err := url.ParseQuery(rawURL[i+1:]); err == nil && q.Get(driver.PasswordFileParam) != "" {
			warnReadable(driver.PasswordFileParam, q.Get(driver.PasswordFileParam))
		}
	}
}

// warn says msg on stderr: "dlock: warning: msg", or a JSON event with
// -o json, so that stderr stays JSON lines.
func warn(msg string) {
	report(struct {
		Event   string `json:"event"`
		Message string `json:"message"`
	}{"warning", msg}, "warning: "+msg)
}

// clientLogger is the client's logger: warnings with -v, debug lines too
// with -vv. Without them dlock reports what matters (a lost lease, a
// failure) itself, once.
func clientLogger() *slog.Logger {
	level := slog.LevelError
	switch {
	case global.verbose >= 2:
		level = slog.LevelDebug
	case global.verbose == 1:
		level = slog.LevelWarn
	}
	if jsonOutput() { // stderr stays JSON lines
		return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// openBackend opens url or, if it is empty, the backend named by --backend,
// --backend-file or $DLOCK_URL. It waits --connect-timeout for the store to
// answer. Every failure is a one-line exit-2 error, without the URL's
// password, that says what it waited for.
func openBackend(ctx context.Context, url string) (*dlock.Client, error) {
	if url == "" {
		var err error
		if url, err = backendURL(ctx); err != nil {
			return nil, err
		}
	}
	began := time.Now()
	octx, cancel := context.WithTimeout(ctx, global.connectTimeout)
	defer cancel()
	c, err := dlock.Open(octx, url, dlock.WithLogger(clientLogger()))
	if err == nil {
		return c, nil
	}
	var ne net.Error
	if octx.Err() != nil && ctx.Err() == nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		// The URL again, for its scheme and host only: with an ended ctx,
		// so that a password_file= that is a silent pipe (which is why
		// Open may have waited) is not waited on again, without a bound.
		ended, end := context.WithCancel(ctx)
		end()
		if u, perr := driver.ParseURLContext(ended, url); perr == nil {
			// One message for every store, whichever timeout ended the wait:
			// ours, or a client's own (memcached's timeout= applies to
			// every request, connecting included).
			// A timeout set from our deadline (a dial's, say) ends at it
			// or after: only one that ended before it is the client's own.
			if dl, _ := octx.Deadline(); time.Now().Before(dl) {
				waited := time.Since(began)
				return nil, fail(exitUsage, "no answer from %s at %s within %v (the client's own timeout, before --connect-timeout %v)",
					u.Scheme, u.Host, waited.Round(100*time.Millisecond), global.connectTimeout)
			}
			return nil, fail(exitUsage, "no answer from %s at %s within %v (--connect-timeout)", u.Scheme, u.Host, global.connectTimeout)
		}
	}
	return nil, fail(exitUsage, "%v", err)
}

// parseWithin parses rawURL, reading a password_file= for at most
// --connect-timeout (a silent pipe is an error then, not a hang).
func parseWithin(ctx context.Context, rawURL string) (*url.URL, error) {
	pctx, cancel := context.WithTimeout(ctx, global.connectTimeout)
	defer cancel()
	return driver.ParseURLContext(pctx, rawURL)
}

// within runs f, one step of an operator's command (inspect, ls, unlock,
// migrate), with ctx bounded by --request-timeout: a store that went
// silent after Open kept dlock inspect waiting for its client's own
// timeouts and retries, 21 s with Redis (an adversary pass), and some
// clients have none.
func within(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, global.requestTimeout)
	defer cancel()
	return f(ctx)
}

// ask is one read of an operator's command, within --request-timeout.
func ask(ctx context.Context, inspect func(context.Context) (dlock.Info, error)) (info dlock.Info, err error) {
	err = within(ctx, func(ctx context.Context) (err error) {
		info, err = inspect(ctx)
		return err
	})
	return info, err
}

// opFailed is the error of an operation (inspect, ls, unlock, migrate) that
// failed with err: bad input (an invalid name, a kind the backend lacks) is
// a usage error (2), as for dlock run, and so is a store that does not
// answer (an unreachable backend, as when connecting); anything else the
// operation's failure (1).
func opFailed(err error) error {
	switch {
	case errors.Is(err, dlock.ErrInvalidName) || errors.Is(err, dlock.ErrUnsupported) || errors.Is(err, dlock.ErrInvalidConfig):
		return fail(exitUsage, "%v", err)
	case noAnswer(err):
		return fail(exitUsage, "the store does not answer (--request-timeout %v): %v", global.requestTimeout, err)
	}
	return fail(exitFailed, "%v", err)
}

// closeBackend closes c, waiting for it no longer than --connect-timeout:
// a client's Close waits for its store client's, and pgx waits up to 15 s
// for each connection that a cut link left closing, so dlock run exited 4
// some 17 s after it stopped its command on a lost lease (an adversary
// pass). The process exits next, which ends whatever is left.
func closeBackend(c *dlock.Client) {
	done := make(chan struct{})
	go func() {
		_ = c.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(global.connectTimeout):
	}
}

// errMustConfirm is unlock --force's refusal to ask, with -o json, whether
// to release a held lock: its question on stderr would break the JSON
// there, and a program reading JSON cannot answer it.
var errMustConfirm = fail(exitUsage, "unlock --force asks before it releases a held lock: with -o json, say --yes")
