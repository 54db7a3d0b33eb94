// Package urlparam bounds the numeric URL parameters that backends hand to
// their client libraries, which trust them: go-redis makes a channel of
// pool_size slots (a negative size panics, a huge one exhausts memory), and
// other clients size buffers and pools the same way. A backend lists its
// numeric parameters with their bounds and calls Check before it builds its
// client, so a bad value is a clear error instead of a crash.
package urlparam

import (
	"fmt"
	"net/url"
	"strconv"
)

// MaxConns bounds the connection pool sizes a URL may ask for. No lock
// client needs more, and each slot costs memory before any connection is
// made.
const MaxConns = 10_000

// Int is the range an integer parameter may take.
type Int struct{ Min, Max int64 }

// Between returns the range min to max, both included.
func Between(min, max int64) Int { return Int{Min: min, Max: max} }

// Pool is the range of a pool size or connection count: 0 (the client's
// default) to MaxConns.
var Pool = Between(0, MaxConns)

// Check parses each parameter of q named in ints and refuses a value that
// is not an integer or is out of its range. The error names the parameter
// and the range, and repeats a value only when it is a number.
func Check(q url.Values, ints map[string]Int) error {
	for name, r := range ints {
		if !q.Has(name) {
			continue
		}
		for _, v := range q[name] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: want an integer from %d to %d", name, r.Min, r.Max)
			}
			if n < r.Min || n > r.Max {
				return fmt.Errorf("%s=%d: want %d to %d", name, n, r.Min, r.Max)
			}
		}
	}
	return nil
}
