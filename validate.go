package dlock

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/keepalive"
)

const (
	defaultMaxNameLen = 1024 // bytes, when a driver does not say
	maxOwnerLen       = 256  // bytes
	// maxAnyTTL bounds every TTL, whatever the backend: stores count expiry
	// in milliseconds or seconds and overflow long before MaxInt64.
	maxAnyTTL = 10 * 365 * 24 * time.Hour
)

// NewOwnerID returns a fresh random owner id: 128 bits from crypto/rand, in
// hex. Every Lock of a Mutex made without WithOwner uses a new one.
func NewOwnerID() string { return newOwnerID() }

func (c *Client) validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > c.caps.MaxNameLen:
		return fmt.Errorf("%w: %d bytes, over the backend's limit of %d", ErrInvalidName, len(name), c.caps.MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidName)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%w: contains a NUL byte", ErrInvalidName)
	}
	if nc, ok := c.drv.(driver.NameChecker); ok {
		return nc.CheckName(name)
	}
	return nil
}

func (c *Client) validate(name string, o mutexOptions) error {
	if err := c.validateName(name); err != nil {
		return err
	}
	if o.ownerSet && o.owner == "" || len(o.owner) > maxOwnerLen || !utf8.ValidString(o.owner) || strings.ContainsRune(o.owner, 0) {
		return fmt.Errorf("%w: want 1 to %d bytes of UTF-8 without NUL", ErrInvalidOwner, maxOwnerLen)
	}
	if len(o.label) > maxOwnerLen || !utf8.ValidString(o.label) || strings.ContainsRune(o.label, 0) {
		return fmt.Errorf("%w: want at most %d bytes of UTF-8 without NUL", ErrInvalidLabel, maxOwnerLen)
	}
	return c.validateTTL(o.ttl)
}

// defaultLabel is "host:pid" of this process.
func defaultLabel() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

func (c *Client) validateTTL(ttl time.Duration) error {
	caps := c.caps
	note := ""
	if caps.TTLNote != "" {
		note = ": " + caps.TTLNote
	}
	switch {
	case ttl <= 0:
		return fmt.Errorf("%w: %v is not positive", ErrInvalidTTL, ttl)
	case caps.MinTTL > 0 && ttl < caps.MinTTL:
		return fmt.Errorf("%w: %v is shorter than the backend's minimum %v%s", ErrInvalidTTL, ttl, caps.MinTTL, note)
	case caps.MaxTTL > 0 && ttl > caps.MaxTTL:
		return fmt.Errorf("%w: %v is longer than the backend's maximum %v%s", ErrInvalidTTL, ttl, caps.MaxTTL, note)
	case keepalive.GrantMargin(ttl) > ttl/2:
		// No grant could be returned: each must have keepalive.GrantMargin left when
		// it arrives, and a round trip takes some of the TTL too.
		return fmt.Errorf("%w: %v is too short to be granted: a grant must arrive with %v of it left, and half of it is kept for the round trip",
			ErrInvalidTTL, ttl, keepalive.GrantMargin(ttl))
	case ttl > maxAnyTTL: // MaxInt64 said "finer than the backend's resolution"
		return fmt.Errorf("%w: %v is longer than any lease dlock keeps (%v); a lease is renewed until Unlock, so a TTL of seconds to minutes holds a lock as long", ErrInvalidTTL, ttl, maxAnyTTL)
	case caps.TTLResolution > 0 && ttl%caps.TTLResolution != 0:
		return fmt.Errorf("%w: %v is finer than the backend's resolution %v", ErrInvalidTTL, ttl, caps.TTLResolution)
	}
	return nil
}
