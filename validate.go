package dlock

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dlock/dlock/internal/core"
)

const maxOwnerLen = 256 // bytes

// NewOwnerID returns a fresh random owner id: 128 bits from crypto/rand, in
// hex. Every Lock of a Mutex made without WithOwner uses a new one.
func NewOwnerID() string { return core.NewOwnerID() }

// validate checks a lock's name and options, for the engine e.
func validate(e *core.Engine, name string, o mutexOptions) error {
	if err := e.CheckName(name); err != nil {
		return err
	}
	if o.ownerSet && o.Owner == "" || len(o.Owner) > maxOwnerLen || !utf8.ValidString(o.Owner) || strings.ContainsRune(o.Owner, 0) {
		return fmt.Errorf("%w: want 1 to %d bytes of UTF-8 without NUL", ErrInvalidOwner, maxOwnerLen)
	}
	if len(o.Label) > maxOwnerLen || !utf8.ValidString(o.Label) || strings.ContainsRune(o.Label, 0) {
		return fmt.Errorf("%w: want at most %d bytes of UTF-8 without NUL", ErrInvalidLabel, maxOwnerLen)
	}
	return e.CheckTTL(o.TTL)
}

// defaultLabel is "host:pid" of this process.
func defaultLabel() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
