package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

// kindFlags choose what `dlock run` holds: a Mutex (default), a read or the
// write hold of an RWMutex, or a permit of a Semaphore.
type kindFlags struct {
	shared, write bool
	permits       int
	cmd           *cobra.Command // to tell --permits 0 from no --permits
}

func addKindFlags(cmd *cobra.Command) *kindFlags {
	k := &kindFlags{cmd: cmd}
	cmd.Flags().BoolVar(&k.shared, "shared", false, "take a read hold of the read-write lock NAME (as flock -s): any number of --shared runs together, none with a --write run")
	cmd.Flags().BoolVar(&k.write, "write", false, "take the write hold of the read-write lock NAME: alone, excluding --shared runs")
	cmd.Flags().IntVar(&k.permits, "permits", 0, "take one of N permits of the semaphore NAME (as consul lock -n): at most N runs at once")
	return k
}

// locker is what the flags ask to hold on name.
func (k *kindFlags) locker(c *dlock.Client, name string, opts []dlock.Option) (dlock.Locker, error) {
	n := 0
	permitsSet := k.permits != 0 || k.cmd != nil && k.cmd.Flags().Changed("permits")
	for _, set := range []bool{k.shared, k.write, permitsSet} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, fail(exitUsage, "--shared, --write and --permits are exclusive")
	case permitsSet && k.permits < 1:
		return nil, fail(exitUsage, "--permits must be at least 1")
	case k.shared:
		return c.RWMutex(name, opts...).RLocker(), nil
	case k.write:
		return c.RWMutex(name, opts...), nil
	case k.permits > 0:
		return c.Semaphore(name, k.permits, opts...).Locker(), nil
	}
	return c.Mutex(name, opts...), nil
}

// inspector reads who holds what the flags ask for on name (a read-write
// lock's or a semaphore's holders, not the mutex's: a refused --write, --shared
// or --permits run named nobody).
func (k *kindFlags) inspector(c *dlock.Client, name string) func(context.Context) (dlock.Info, error) {
	switch {
	case k.shared || k.write:
		return c.RWMutex(name).Inspect
	case k.permits > 0:
		return c.Semaphore(name, k.permits).Inspect
	}
	return func(ctx context.Context) (dlock.Info, error) { return c.Inspect(ctx, name) }
}

// maxNamed is how many of a lock's holders a "not acquired" names.
const maxNamed = 3

// holdersText names a lock's holders, as holderText does a mutex's: of a
// read-write lock or semaphore, each with its kind (write, shared,
// permit), at most maxNamed and how many more.
func holdersText(i dlock.Info) string {
	if len(i.Holders) == 0 {
		return holderText(i)
	}
	var parts []string
	for j, h := range i.Holders {
		if j == maxNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(i.Holders)-maxNamed))
			break
		}
		parts = append(parts, h.Kind.String()+" "+holderText(dlock.Info{Owner: h.Owner, Label: h.Label, Token: h.Token, TTL: h.TTL}))
	}
	return strings.Join(parts, "; ")
}

// kindsJSON is what inspect -o json adds for a name's read-write lock and
// semaphore, when the backend has them and they are held or waited for.
type kindsJSON struct {
	RWMutex   *kindInfoJSON `json:"rwmutex"`
	Semaphore *kindInfoJSON `json:"semaphore"`
}

type kindInfoJSON struct {
	Held    bool         `json:"held"`
	Writer  *holderJSON  `json:"writer"`
	Readers []holderJSON `json:"readers"`
	Permits int          `json:"permits"` // a semaphore's count
	Holders []holderJSON `json:"holders"` // a semaphore's permit holders
	Waiters int          `json:"waiters"`
}

type holderJSON struct {
	Owner string `json:"owner"`
	Label string `json:"label"`
	Token uint64 `json:"token"`
	Holds int    `json:"holds"`
	TTLMs int64  `json:"ttl_ms"`
}

func toHolderJSON(h dlock.Holder) holderJSON {
	return holderJSON{Owner: h.Owner, Label: h.Label, Token: h.Token, Holds: h.Holds, TTLMs: h.TTL.Milliseconds()}
}

// inspectKinds describes name's read-write lock and semaphore; backends
// without them, and free ones, give nil.
func inspectKinds(ctx context.Context, c *dlock.Client, name string) (kindsJSON, error) {
	var k kindsJSON
	var err error
	if k.RWMutex, err = inspected(c.RWMutex(name).Inspect(ctx)); err != nil {
		return k, err
	}
	// A semaphore's permit count plays no part in reading it.
	k.Semaphore, err = inspected(c.Semaphore(name, 1).Inspect(ctx))
	return k, err
}

// kindHeld fails if name's mutex is free but its read-write lock or
// semaphore is held or waited for: unlock --force without --kind releases
// the mutex only, and "not held" would tell an operator a stuck lock is
// free.
func kindHeld(ctx context.Context, c *dlock.Client, name string) error {
	k, err := inspectKinds(ctx, c, name)
	if err != nil {
		return opFailed(err)
	}
	what, flag := "", ""
	switch {
	case k.RWMutex != nil:
		what, flag = "a read-write lock", "rw"
	case k.Semaphore != nil:
		what, flag = "a semaphore", "sem"
	default:
		return nil
	}
	return fail(exitFailed, "%s: not released: the mutex is free, but %s of this name is held or waited for (see dlock inspect); "+
		"release it with unlock --force --kind %s", esc(name), what, flag)
}

// inspected is the JSON of what one kind's Inspect returned: nil for a
// backend without the kind, and for a free lock.
func inspected(i dlock.Info, err error) (*kindInfoJSON, error) {
	switch {
	case errors.Is(err, dlock.ErrUnsupported):
		return nil, nil
	case err != nil:
		return nil, err
	case !i.Held && i.Waiters == 0:
		return nil, nil
	}
	return kindInfoOf(i), nil
}

// kindInfoOf is the JSON of a read-write lock's (KindShared, KindWrite) or
// a semaphore's (KindPermit) Info.
func kindInfoOf(i dlock.Info) *kindInfoJSON {
	j := &kindInfoJSON{Held: i.Held, Waiters: i.Waiters, Readers: []holderJSON{}, Holders: []holderJSON{}} // empty lists, not null
	if i.Kind == dlock.KindPermit {
		j.Permits = i.Limit
		for _, h := range i.Holders {
			j.Holders = append(j.Holders, toHolderJSON(h))
		}
		return j
	}
	for _, h := range i.Holders {
		if h.Kind == dlock.KindWrite {
			hj := toHolderJSON(h)
			j.Writer = &hj
		} else {
			j.Readers = append(j.Readers, toHolderJSON(h))
		}
	}
	return j
}

func who(h holderJSON) string {
	left := timeLeft(time.Duration(h.TTLMs) * time.Millisecond) // ZooKeeper's: unknown, not "0s"
	if h.Label != "" {
		return fmt.Sprintf("%s (owner %s, token %d, %s)", esc(h.Label), esc(h.Owner), h.Token, left)
	}
	return fmt.Sprintf("%s (token %d, %s)", esc(h.Owner), h.Token, left)
}

func whoAll(hs []holderJSON) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = who(h)
	}
	return strings.Join(parts, ", ")
}

func printKinds(w io.Writer, name string, k kindsJSON) {
	name = esc(name)
	if rw := k.RWMutex; rw != nil {
		switch {
		case rw.Writer != nil:
			fmt.Fprintf(w, "%s (read-write): write-held by %s, %d waiting\n", name, who(*rw.Writer), rw.Waiters)
		case len(rw.Readers) > 0:
			fmt.Fprintf(w, "%s (read-write): %d readers: %s; %d waiting\n", name, len(rw.Readers), whoAll(rw.Readers), rw.Waiters)
		default:
			fmt.Fprintf(w, "%s (read-write): free, %d waiting\n", name, rw.Waiters)
		}
	}
	if s := k.Semaphore; s != nil {
		fmt.Fprintf(w, "%s (semaphore): %d of %d permits held: %s\n", name, len(s.Holders), s.Permits, whoAll(s.Holders))
	}
}
