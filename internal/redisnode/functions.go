package redisnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/dlock/dlock"
	"github.com/redis/go-redis/v9"
)

// dlock runs its scripts as Redis Functions (Redis 7.0 and later): one
// library, loaded once into the server, whose functions a user may call
// with FCALL alone. A tenant's ACL then grants +fcall, not +eval, so no
// tenant can run a script of its own (EVAL "while true do end" 0 would stall
// every tenant of the server). The library's name carries a digest of its
// code, so clients of two dlock versions with different scripts use two
// libraries side by side and never each other's. Servers older than 7.0
// (FCALL unknown), and nodes told so (UseEval), run the same scripts with
// EVALSHA, falling back to EVAL on NOSCRIPT.

// script is one of dlock's Lua scripts: its source for EVAL and its
// function in the library.
type script struct {
	*redis.Script
	src   string // the Lua source
	fn    string // the function's name in the library
	fnArg any    // fn, boxed once for FCALL's arguments (set with fn's final name)
}

var (
	allScripts []*script // in the order they were declared
	library    struct {
		once sync.Once
		name string // "dlock_<digest>"
		code string // the library's source, for FUNCTION LOAD
	}
)

// newScript fills in the timing constants, so scripts need no arguments for
// them, and adds the script, as function name, to the library.
func newScript(name, src string) *script {
	src = strings.NewReplacer(
		"WAITER_TTL", fmt.Sprint(ms(WaiterTTL)),
		"HANDOFF_TTL", fmt.Sprint(ms(HandoffTTL)),
		"RECENT", fmt.Sprint(recentRequests),
		"TOKEN_LIMIT", fmt.Sprint(TokenLimit),
		"PAST_LIMIT", fmt.Sprintf("%q", pastLimit),
	).Replace(src)
	s := &script{Script: redis.NewScript(src), src: src, fn: name}
	allScripts = append(allScripts, s)
	return s
}

// buildLibrary names every function after the library and writes the
// library's code: each script becomes the body of a function whose
// parameters are named KEYS and ARGV, as the globals of EVAL are.
func buildLibrary() {
	library.once.Do(func() {
		sum := sha256.New()
		for _, s := range allScripts {
			fmt.Fprintf(sum, "%s\x00%s\x00", s.fn, s.Hash())
		}
		library.name = "dlock_" + hex.EncodeToString(sum.Sum(nil))[:16]
		var b strings.Builder
		fmt.Fprintf(&b, "#!lua name=%s\n", library.name)
		for _, s := range allScripts {
			s.fn = library.name + "_" + s.fn
			s.fnArg = s.fn
			fmt.Fprintf(&b, "redis.register_function('%s', function(KEYS, ARGV)\n%s\nend)\n", s.fn, s.src)
		}
		library.code = b.String()
	})
}

// Library returns the name and the code of dlock's function library, for
// an operator who loads it with FUNCTION LOAD (redis-cli -x FUNCTION LOAD <
// file). Clients with the right load it themselves (see Node.LoadFunctions).
func Library() (name, code string) {
	buildLibrary()
	return library.name, library.code
}

// UseEval makes the node run its scripts with EVALSHA (and EVAL on
// NOSCRIPT) instead of FCALL: for servers older than 7.0, which the node
// also finds out by itself, or for users who choose it. The user then needs
// +evalsha +eval instead of +fcall.
func (n *Node) UseEval() { n.eval.Store(true) }

// UsesEval reports whether the node runs its scripts with EVALSHA.
func (n *Node) UsesEval() bool { return n.eval.Load() }

// LoadFunctions loads dlock's function library into the server (every
// master of a Cluster) unless it is there. It needs +function|load; a user
// without it gets an error wrapping dlock.ErrInvalidConfig.
func (n *Node) LoadFunctions(ctx context.Context) error {
	buildLibrary()
	load := func(ctx context.Context, c redis.Cmdable) error {
		err := c.FunctionLoad(ctx, library.code).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil // loaded before, by an operator or another client
		}
		return err
	}
	var err error
	if cc, ok := n.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	} else {
		err = load(ctx, n.rdb)
	}
	switch {
	case err == nil:
		return nil
	case isUnknownCommand(err):
		n.UseEval()
		return nil
	case strings.Contains(err.Error(), "NOPERM"):
		return fmt.Errorf("redislock: dlock's Redis functions (library %s) are not loaded, and this user may not load them "+
			"(%w): run dlock migrate once as a user with +function|load, or choose scripts=eval: %w",
			library.name, dlock.ErrInvalidConfig, err)
	}
	return fmt.Errorf("redislock: load functions: %w", err)
}

// isUnknownCommand reports whether err says the server does not know the
// command (FCALL or FUNCTION before Redis 7.0).
func isUnknownCommand(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "ERR unknown command")
}

// isNoFunction reports whether err says the function is not loaded (after
// a restart without persistence, FUNCTION FLUSH, or on first use).
func isNoFunction(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// call runs s with keys and args: with FCALL, loading the library if the
// server lacks it, or with EVALSHA (see UseEval). keys are as Keys.args
// holds them: their count, then the keys.
func (n *Node) call(ctx context.Context, s *script, keys []any, args ...any) *redis.Cmd {
	if n.eval.Load() {
		return n.evalsha(ctx, s, keys, args)
	}
	buildLibrary()
	cmd := n.fcall(ctx, s, keys, args)
	err := cmd.Err()
	switch {
	case isUnknownCommand(err):
		n.UseEval()
		return n.evalsha(ctx, s, keys, args)
	case isNoFunction(err):
		if lerr := n.LoadFunctions(ctx); lerr != nil {
			c := redis.NewCmd(ctx)
			c.SetErr(lerr)
			return c
		}
		if n.eval.Load() {
			return n.evalsha(ctx, s, keys, args)
		}
		return n.fcall(ctx, s, keys, args)
	}
	return cmd
}

// fcall sends FCALL s with keys and args as go-redis's FCall does, but
// builds the command's arguments in one slice from keys boxed once per lock
// (go-redis's FCall boxes every key again and copies args into a second
// slice), and reuses that slice once Process has returned (see argSlices):
// a lock's scripts run on every Lock and Unlock.
//
// The returned command's Args are cleared: callers read its reply only.
func (n *Node) fcall(ctx context.Context, s *script, keys, args []any) *redis.Cmd {
	p := argSlices.Get().(*[]any)
	a := append(append(append((*p)[:0], "fcall", s.fnArg), keys...), args...)
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(3) // as FCall: the keys start after the count, for a Cluster's routing
	_ = n.rdb.Process(ctx, cmd)
	clear(a) // the values the call boxed go with it
	*p = a[:0]
	argSlices.Put(p)
	return cmd
}

// argSlices are the argument slices of FCALLs, reused across calls: a
// Lock+Unlock makes two, about 400 bytes. go-redis is done with a command's
// arguments when Process returns (it writes and reads on the calling
// goroutine, retries and redirections included, and its hooks run inside
// Process); a hook that keeps a command past that must copy its Args, as
// the package doc of redislock says.
var argSlices = sync.Pool{New: func() any { a := make([]any, 0, 16); return &a }}

// evalsha runs s with EVALSHA, or EVAL on NOSCRIPT. It copies args, which
// go-redis keeps, so that call's own args need not escape.
func (n *Node) evalsha(ctx context.Context, s *script, keys, args []any) *redis.Cmd {
	return s.Run(ctx, n.rdb, keyStrings(keys), slices.Clone(args)...)
}

// keyStrings returns the keys of a call's keys (their count, then the
// keys), for EVALSHA.
func keyStrings(keys []any) []string {
	out := make([]string, len(keys)-1)
	for i, k := range keys[1:] {
		out[i] = k.(string)
	}
	return out
}

// queue queues s in pipe: with FCALL, or with EVALSHA (or, with eval,
// EVAL) when the node uses them.
func (n *Node) queue(ctx context.Context, pipe redis.Pipeliner, s *script, eval bool, keys []string, args ...any) *redis.Cmd {
	switch {
	case !n.eval.Load():
		buildLibrary()
		return pipe.FCall(ctx, s.fn, keys, args...)
	case eval:
		return s.Eval(ctx, pipe, keys, args...)
	}
	return s.EvalSha(ctx, pipe, keys, args...)
}

// recover looks at the error of a queued call: retry says to queue it
// again (the server lacked the script, which is now loaded, or FCALL, and
// the node now uses EVAL); else cause is the error to report, which may say
// why the library could not be loaded.
func (n *Node) recover(ctx context.Context, err error) (retry bool, cause error) {
	switch {
	case err == nil:
		return false, nil
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		return true, err
	case isUnknownCommand(err):
		n.UseEval()
		return true, err
	case isNoFunction(err):
		if lerr := n.LoadFunctions(ctx); lerr != nil {
			return false, lerr
		}
		return true, err
	}
	return false, err
}
