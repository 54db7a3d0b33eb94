package sqlbase

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/dlock/dlock/driver"
)

// The modes of both SQL backends, as their Mode types spell them: table
// (rows with expiry times), row (a row lock held in a transaction) and
// session (a lock held by a connection's session).
const (
	ModeTable   = "table"
	ModeRow     = "row"
	ModeSession = "session"
)

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
	return mode, maxHeld, nil
}

// URLOptions reads the parameters both backends' URLs take: mode and
// max_held (0 if absent, else a positive number). pkg prefixes the error.
func URLOptions(pkg string, q url.Values) (mode string, maxHeld int, err error) {
	if v := q.Get("max_held"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return "", 0, fmt.Errorf("%s: %w: max_held %q", pkg, driver.ErrInvalidURL, v)
		}
		maxHeld = n
	}
	return q.Get("mode"), maxHeld, nil
}
