package natslock

// Opening a client from a URL: its parameters, credentials and TLS.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/smallfile"
	"github.com/dlock/dlock/internal/tlsurl"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func badURL(format string, args ...any) error {
	return fmt.Errorf("natslock: %w: "+format, append([]any{dlock.ErrInvalidURL}, args...)...)
}

// maxInboxPrefix bounds an inbox prefix, in bytes. A prefix is a name, and
// every request's reply subject carries it (with nats.go's ~50 bytes of
// its own) on the same control line as the subject of the longest lock's
// key (~1,400 bytes): 256 keeps the two well inside the server's 4 KiB
// control line, which a longer prefix could overflow (the server then
// drops the connection).
const maxInboxPrefix = 256

// checkInboxPrefix refuses an inbox prefix the server cannot use as the
// start of a subject: nats.go checks only for wildcards and a trailing dot.
// It must be dot-separated non-empty tokens of valid UTF-8, without
// wildcards, spaces or control characters (which end or break a protocol
// line), at most maxInboxPrefix bytes. The error does not repeat a long
// prefix.
func checkInboxPrefix(p string) error {
	show := p
	if len(show) > 40 {
		show = show[:40] + "…"
	}
	switch {
	case p == "":
		return errors.New("empty")
	case len(p) > maxInboxPrefix:
		return fmt.Errorf("%q is %d bytes: want at most %d", show, len(p), maxInboxPrefix)
	case !utf8.ValidString(p):
		return fmt.Errorf("%q is not valid UTF-8", show)
	case strings.ContainsAny(p, "*>"):
		return fmt.Errorf("%q holds a wildcard", show)
	case strings.ContainsFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("%q holds a space or a control character", show)
	case slices.Contains(strings.Split(p, "."), ""):
		return fmt.Errorf("%q has an empty token: want tokens separated by single dots, with none at either end", show)
	}
	return nil
}

func openURL(ctx context.Context, u *url.URL) (driver.Driver, error) {
	q := u.Query()
	opts := Options{Bucket: strings.Trim(u.Path, "/"), CloseConn: true}
	nopts := []nats.Option{nats.Name("dlock"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond), nats.PingInterval(5 * time.Second), nats.MaxPingsOutstanding(2),
		// No buffering while disconnected: a renewal fails at once rather
		// than wait in a queue past the lease.
		nats.ReconnectBufSize(-1)}
	if u.Scheme == SchemeTLS {
		tc, err := tlsurl.Config(ctx, q)
		if err != nil {
			return nil, badURL("%v", err)
		}
		nopts = append(nopts, nats.Secure(tc))
	} else if tlsurl.Has(q) {
		return nil, badURL("ca, cert, key and insecure_skip_verify need TLS: use tls://")
	}
	if err := checkBucket(opts.Bucket); err != nil {
		return nil, badURL("%v", err)
	}
	for k := range q {
		if n := len(q[k]); n > 1 { // the first would be used, silently
			return nil, badURL("%s is given %d times", k, n)
		}
		v := q.Get(k)
		switch k {
		case "ca", "cert", "key", "insecure_skip_verify":
		case "replicas":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 5 {
				return nil, badURL("replicas %q: want 1 to 5", v)
			}
			opts.Replicas = n
		case "storage":
			switch v {
			case "file":
				opts.Storage = jetstream.FileStorage
			case "memory":
				opts.Storage = jetstream.MemoryStorage
			default:
				return nil, badURL("storage %q: want file or memory", v)
			}
		case "discovered":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, badURL("discovered %q: want true or false", v)
			}
			if !b {
				nopts = append(nopts, nats.IgnoreDiscoveredServers())
			}
		case "create":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, badURL("create %q: want true or false", v)
			}
			opts.NoCreate = !b
		case "creds":
			// nats.go reads the file itself, whole and again at each
			// reconnection: bound it first, and refuse a pipe.
			if err := libraryFile(ctx, v); err != nil {
				return nil, badURL("creds %s: %v", v, err)
			}
			nopts = append(nopts, nats.UserCredentials(v))
		case "nkey":
			if err := libraryFile(ctx, v); err != nil {
				return nil, badURL("nkey %s: %v", v, err)
			}
			o, err := nats.NkeyOptionFromSeed(v)
			if err != nil {
				return nil, badURL("nkey %s: cannot read a seed from it", v)
			}
			nopts = append(nopts, o)
		case "inbox_prefix":
			if err := checkInboxPrefix(v); err != nil {
				return nil, badURL("inbox_prefix: %v", err)
			}
			nopts = append(nopts, nats.CustomInboxPrefix(v))
		case "token_file":
			b, err := smallfile.Read(ctx, v, smallfile.MaxSecret)
			if err != nil {
				return nil, badURL("token_file %s: %v", v, err)
			}
			tok := strings.TrimSpace(string(b))
			if tok == "" || strings.ContainsAny(tok, "\r\n") {
				return nil, badURL("token_file %s: want the token alone on one line", v)
			}
			nopts = append(nopts, nats.Token(tok))
		default:
			return nil, badURL("unknown parameter %q", k)
		}
	}
	if opts.Bucket == "" {
		opts.Bucket = DefaultBucket
	}
	if u.User != nil {
		pw, ok := u.User.Password()
		if !ok { // nats://TOKEN@host, as NATS clients read it
			nopts = append(nopts, nats.Token(u.User.Username()))
		} else {
			nopts = append(nopts, nats.UserInfo(u.User.Username(), pw))
		}
	}
	var servers []string
	scheme := "nats://"
	if u.Scheme == SchemeTLS {
		scheme = "tls://"
	}
	for _, h := range driver.Hosts(u) {
		if h == "" || strings.ContainsAny(h, "/ @") {
			return nil, badURL("bad host")
		}
		servers = append(servers, scheme+h)
	}
	if len(servers) == 0 {
		return nil, badURL("want nats://host:4222[,host:4222…]/BUCKET")
	}
	nopts = append(nopts, nats.Timeout(dialTimeout(ctx, len(servers))))
	nopts = append(nopts, logHandlers(driver.Logger(ctx))...)
	nc, err := nats.Connect(strings.Join(servers, ","), nopts...)
	if err != nil {
		// nats.go's errors name neither the URL nor its password.
		return nil, fmt.Errorf("natslock: connect: %w", err)
	}
	d, err := newDriver(ctx, nc, opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return d, nil
}

// dialTimeout is how long nats.go may take to dial one of a URL's
// servers and finish its handshake: 5 s, or what is left of ctx shared by
// the servers if less, since nats.Connect takes no ctx and tries the
// servers one after another (a server that accepts and never answers held
// Open 5 s past a shorter deadline, and three such servers held it three
// times the deadline). Reconnects use it too.
func dialTimeout(ctx context.Context, servers int) time.Duration {
	d := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(dl)/time.Duration(max(servers, 1)), time.Millisecond))
	}
	return d
}

// libraryFile checks a file that nats.go reads by itself: a regular file
// (a pipe would be read once here and then waited on for ever) of at most
// smallfile.MaxSecret bytes.
func libraryFile(ctx context.Context, path string) error {
	if err := smallfile.Regular(path); err != nil {
		return err
	}
	_, err := smallfile.Read(ctx, path, smallfile.MaxSecret)
	return err
}
