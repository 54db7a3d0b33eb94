package redisnode

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// go-redis logs through one process-wide logger (redis.SetLogger), with
// the context of the command it was running, or none (its dials run on a
// context of their own). RouteLogs installs, once per process, a logger
// that sends a line to a dlock client's slog logger when the line is about
// that client: its context carries the logger (put there by the hook
// RouteLogs adds to the client), or it names an address the client has
// dialled (failed dials: "dial tcp ADDR: ..."). Every other line goes where
// go-redis's default logger sends it (stderr). So the library writes nothing
// to stderr by itself. An application that sets its own go-redis logger
// after opening dlock's client takes every line back.

type loggerKey struct{}

var (
	installLogger sync.Once
	routes        = &router{fallback: log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile), byAddr: map[string]*slog.Logger{}}
)

// RouteLogs makes go-redis's lines about rdb go to l. addrs are the
// addresses rdb was given (host:port): a Sentinel client's sentinels and a
// cluster client's seeds are dialled by clients of go-redis's own, which
// no hook of rdb's sees, so their failed dials' lines went to stderr (an
// adversary pass: eight lines from dlock inspect of a refused sentinel).
func RouteLogs(rdb redis.UniversalClient, l *slog.Logger, addrs ...string) {
	installLogger.Do(func() { redis.SetLogger(routes) })
	for _, a := range addrs {
		routes.dialled(a, l)
	}
	rdb.AddHook(logHook{l})
}

// router is the process-wide go-redis logger.
type router struct {
	fallback *log.Logger
	mu       sync.Mutex
	byAddr   map[string]*slog.Logger // addresses dlock clients dialled
}

func (r *router) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	if l := r.loggerFor(ctx, msg); l != nil {
		l.Warn("dlock: go-redis: " + msg)
		return
	}
	_ = r.fallback.Output(2, msg)
}

// loggerFor finds the dlock client a line is about, if any.
func (r *router) loggerFor(ctx context.Context, msg string) *slog.Logger {
	if ctx != nil {
		if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
			return l
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for addr, l := range r.byAddr {
		if strings.Contains(msg, " "+addr+":") || strings.HasSuffix(msg, " "+addr) {
			return l
		}
	}
	return nil
}

// dialled notes that a dlock client whose logger is l dials addr.
func (r *router) dialled(addr string, l *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.byAddr) >= 1024 { // a bound: addresses come and go with failovers
		clear(r.byAddr)
	}
	r.byAddr[addr] = l
}

// logHook puts the dlock client's logger in the context of every command
// and dial of its go-redis client, and notes the addresses it dials.
type logHook struct{ l *slog.Logger }

func (h logHook) with(ctx context.Context) context.Context {
	return context.WithValue(ctx, loggerKey{}, h.l)
}

func (h logHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		routes.dialled(addr, h.l)
		return next(h.with(ctx), network, addr)
	}
}

func (h logHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { return next(h.with(ctx), cmd) }
}

func (h logHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { return next(h.with(ctx), cmds) }
}
