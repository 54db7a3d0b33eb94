package sqlbase

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/urlparam"
)

// The modes of both SQL backends, as their Mode types spell them: table
// (rows with expiry times), row (a row lock held in a transaction) and
// session (a lock held by a connection's session).
const (
	ModeTable   = "table"
	ModeRow     = "row"
	ModeSession = "session"
)

// MaxLimit is the largest semaphore permit count both backends store (their
// lim columns are 32-bit).
const MaxLimit = math.MaxInt32

// DefaultMaxHeld is how many connections row and session modes hold at
// most when Options.MaxHeld is not set.
const DefaultMaxHeld = 16

// CheckOptions checks a backend's Options.Mode and fills in the defaults: table
// mode if mode is empty, DefaultMaxHeld if maxHeld is not positive. pkg
// (the backend's package name) prefixes the error.
func CheckOptions[M ~string](pkg string, mode M, maxHeld int) (M, int, error) {
	switch mode {
	case "":
		mode = ModeTable
	case ModeTable, ModeRow, ModeSession:
	default:
		return "", 0, fmt.Errorf("%s: %w: mode %q (want table, row or session)", pkg, driver.ErrInvalidURL, mode)
	}
	if maxHeld <= 0 {
		maxHeld = DefaultMaxHeld
	}
	if maxHeld > urlparam.MaxConns { // each slot is allocated up front
		return "", 0, fmt.Errorf("%s: %w: MaxHeld %d: want at most %d", pkg, driver.ErrInvalidConfig, maxHeld, urlparam.MaxConns)
	}
	return mode, maxHeld, nil
}

// HeldCap bounds maxHeld, in row and session modes, by a pool of poolMax
// connections (0: no bound). A held lock, or a wait for one, keeps a
// connection; the rest of the client needs another: a row-mode token, the
// statement that ends a cancelled wait's connection, Inspect. With every
// connection held, acquires waited for each other's until their ctx ended,
// and a TryLock of a free lock for a free connection. Row mode refuses a
// pool of one; session mode holds one lock on it, and the rest waits for
// that connection (Inspect; a cancelled wait returns up to 3 s late).
func HeldCap[M ~string](pkg string, mode M, maxHeld, poolMax int) (int, error) {
	switch {
	case mode == ModeTable || poolMax <= 0:
		return maxHeld, nil
	case poolMax == 1 && mode == ModeSession:
		return 1, nil
	case poolMax < 2:
		return 0, fmt.Errorf("%s: %w: %s mode needs a pool of 2 connections or more: one held per lock, and one for its token", pkg, driver.ErrInvalidConfig, mode)
	}
	return min(maxHeld, poolMax-1), nil
}

// URLOptions reads the parameters both backends' URLs take: mode and
// max_held (0 if absent, else 1 to urlparam.MaxConns). pkg prefixes the error.
func URLOptions(pkg string, q url.Values) (mode string, maxHeld int, err error) {
	for _, k := range []string{"mode", "max_held"} {
		if n := len(q[k]); n > 1 { // the first would be used, silently
			return "", 0, fmt.Errorf("%s: %w: %s is given %d times", pkg, driver.ErrInvalidURL, k, n)
		}
	}
	if err := urlparam.Check(q, map[string]urlparam.Int{"max_held": urlparam.Between(1, urlparam.MaxConns)}); err != nil {
		return "", 0, fmt.Errorf("%s: %w: %v", pkg, driver.ErrInvalidURL, err)
	}
	if v := q.Get("max_held"); v != "" {
		maxHeld, _ = strconv.Atoi(v) // checked above
	}
	return q.Get("mode"), maxHeld, nil
}

// Caps are an SQL backend's capabilities in a mode: names up to the 1,024
// bytes of the tables' name columns, TTLs from 1 ms counted in resolution;
// table mode (table) counts an owner's holds and has every kind, row and
// session modes hold a connection that waits in the server and have kinds,
// with note saying why not the others.
func Caps(table bool, resolution time.Duration, kinds []driver.Kind, note string) driver.Caps {
	c := driver.Caps{MaxNameLen: 1024, MinTTL: time.Millisecond, TTLResolution: resolution}
	if table {
		c.Reentrant, c.Kinds = true, []driver.Kind{driver.Shared, driver.Write, driver.Permit}
		return c
	}
	c.Blocking, c.Kinds, c.KindsNote = true, kinds, note
	return c
}

// AcquireFunc is one of a backend's ways to acquire.
type AcquireFunc func(context.Context, driver.Request) (driver.Grant, error)

// Acquire routes r as both SQL backends do: a kind the mode does not
// support (caps) is refused with driver.ErrUnsupported and caps.KindsNote;
// in table mode (table) a Mutex takes its row and another kind its hold,
// and in row and session modes every kind holds a connection (conn). pkg
// prefixes the error.
func Acquire(ctx context.Context, pkg string, caps driver.Caps, table bool, r driver.Request, row, kind, conn AcquireFunc) (driver.Grant, error) {
	if r.Kind != driver.Exclusive && !caps.Supports(r.Kind) {
		return driver.Grant{}, fmt.Errorf("%s: %w: %s", pkg, driver.ErrUnsupported, caps.KindsNote)
	}
	if r.Kind == driver.Permit && r.Limit > MaxLimit { // else a raw out-of-range error from the driver
		return driver.Grant{}, fmt.Errorf("%s: %w: %d permits: the permit count is kept in a 32-bit column, at most %d", pkg, driver.ErrInvalidConfig, r.Limit, MaxLimit)
	}
	if !table {
		return conn(ctx, r)
	}
	if r.Kind != driver.Exclusive {
		return kind(ctx, r)
	}
	return row(ctx, r)
}
