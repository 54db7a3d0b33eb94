package dlock

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
)

// Sentinel errors, for errors.Is. Errors returned by dlock wrap one of these
// together with the lock name and backend; the store's own error, where there
// is one, stays reachable with errors.As.
var (
	// ErrNotAcquired is returned by TryLock when another owner holds the lock.
	ErrNotAcquired = driver.ErrNotAcquired
	// ErrLeaseLost means a lease ended without Unlock: it expired, a renewal
	// could not be confirmed in time, the store's session ended, or the lock
	// was removed behind the holder's back.
	ErrLeaseLost = driver.ErrLeaseLost
	// ErrNotHeld is returned by Unlock on a lease that was already unlocked.
	ErrNotHeld = driver.ErrNotHeld
	// ErrClosed is returned after Client.Close, and by Err of the leases the
	// close released.
	ErrClosed = driver.ErrClosed
	// ErrInvalidName means an empty, malformed or too long lock name.
	ErrInvalidName = driver.ErrInvalidName
	// ErrInvalidTTL means a TTL that is not positive or that the backend
	// cannot keep (too short, too long, or finer than its resolution).
	ErrInvalidTTL = driver.ErrInvalidTTL
	// ErrInvalidOwner means an empty or too long owner id.
	ErrInvalidOwner = driver.ErrInvalidOwner
	// ErrInvalidLabel means a holder label over 256 bytes, not UTF-8, or
	// with a NUL byte.
	ErrInvalidLabel = driver.ErrInvalidLabel
	// ErrInvalidURL means a malformed backend URL or bad URL parameters.
	ErrInvalidURL = driver.ErrInvalidURL
	// ErrInvalidConfig means a configuration the backend cannot work with,
	// such as too few Redlock nodes.
	ErrInvalidConfig = driver.ErrInvalidConfig
	// ErrUnsupported means the backend cannot do what was asked.
	ErrUnsupported = driver.ErrUnsupported
	// ErrUnknownScheme means no backend is registered for a URL's scheme.
	ErrUnknownScheme = driver.ErrUnknownScheme
	// ErrLimitMismatch is returned by Semaphore.Acquire when the semaphore's
	// live holders use another permit count than the one it was made with.
	ErrLimitMismatch = driver.ErrLimitMismatch
	// ErrRenewalMismatch is returned by a re-entry (a Lock of a lock its
	// owner holds, by WithOwner or through a ctx carrying a lease) that asks
	// for renewed leases where the hold's are fixed (WithoutRenewal), or
	// the reverse: the leases of one hold share its renewal.
	ErrRenewalMismatch = core.ErrRenewalMismatch
	// ErrNilContext is returned when a nil context is passed.
	ErrNilContext = errNilContext
)

var errNilContext = core.ErrNilContext

// Error is the error type of lock operations: it names the operation, the
// backend and the lock.
type Error struct {
	Op      string // "lock", "trylock", "unlock", "inspect", ...
	Backend string // the URL scheme of the backend, e.g. "redis"
	Name    string // the lock name
	Err     error  // the cause; wraps a sentinel error
}

// Error implements error. A name over 128 bytes is cut, in the message
// and wherever the cause repeats it, to its start and a hash (see
// driver.QuoteName); e.Name keeps it whole.
func (e *Error) Error() string {
	cause := strings.TrimPrefix(e.Err.Error(), "dlock: ")
	if len(e.Name) > driver.MaxNameShown {
		short := driver.QuoteName(e.Name)
		cause = strings.ReplaceAll(strings.ReplaceAll(cause, strconv.Quote(e.Name), short), e.Name, short)
	}
	switch {
	case e.Name == "" && e.Backend == "": // no one lock: a nil lease, LockAll's arguments
		return fmt.Sprintf("dlock: %s: %s", e.Op, cause)
	case e.Backend == "":
		return fmt.Sprintf("dlock: %s %s: %s", e.Op, driver.QuoteName(e.Name), cause)
	}
	return fmt.Sprintf("dlock: %s %s (%s): %s", e.Op, driver.QuoteName(e.Name), e.Backend, cause)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
