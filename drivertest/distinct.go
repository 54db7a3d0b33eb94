package drivertest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// NamePairs returns pairs of distinct names: first the pairs stores are
// known to confuse (case, a leading or trailing "/" or space, Unicode
// normal forms, a long name and the short form a store may hash it to, a
// child named like a contender node), then n random pairs drawn from seed,
// each a random name and a small change of it. Every name starts with
// base, so that tests do not meet each other's locks.
func NamePairs(base string, seed uint64, n int) [][2]string {
	long := base + strings.Repeat("L", 65)
	sum := sha256.Sum256([]byte(long))
	pairs := [][2]string{
		{base + "job", base + "Job"},
		{base + "a", "/" + base + "a"},
		{base + "a", base + "a/"},
		{base + "a", base + "a "},
		{base + "caf\u00e9", base + "cafe\u0301"},
		{base + "caf\u00e9", base + "cafe"},
		{long, "dlock:" + hex.EncodeToString(sum[:])[:58]},
		{base + strings.Repeat("x", 300) + "a", base + strings.Repeat("x", 300) + "b"},
		{base + "p", base + "p/_c_0123456789abcdef-lock-0000000000"},
		{base + "p", base + "p/lock-0000000001"},
		{base + "a:b", base + "a/b"},
		{base + "a%2Fb", base + "a/b"},
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	alphabet := []rune("aAbBzZ09/:._- é\u0301ßSsİi%*?\\\"'")
	for range n {
		name := make([]rune, 1+r.IntN(80))
		for i := range name {
			name[i] = alphabet[r.IntN(len(alphabet))]
		}
		other := append([]rune(nil), name...)
		switch i := r.IntN(len(other)); r.IntN(4) {
		case 0: // change one character
			other[i] = alphabet[r.IntN(len(alphabet))]
		case 1: // drop one
			other = append(other[:i], other[i+1:]...)
		case 2: // add one
			other = append(other[:i], append([]rune{alphabet[r.IntN(len(alphabet))]}, other[i:]...)...)
		default: // flip the case of one
			s := string(other[i])
			if u := strings.ToUpper(s); u != s {
				s = u
			} else {
				s = strings.ToLower(s)
			}
			other = append(other[:i], append([]rune(s), other[i+1:]...)...)
		}
		a, b := base+string(name), base+string(other)
		if a != b {
			pairs = append(pairs, [2]string{a, b})
		}
	}
	return pairs
}

// DistinctNames checks that each pair's two names are two locks: with one
// held through client a, the other is free to client b, both ways round.
// A name the backend refuses (ErrInvalidName) skips its pair: refusing is
// the other way to keep names apart.
func DistinctNames(t *testing.T, a, b *dlock.Client, pairs [][2]string) {
	t.Helper()
	const ttl = 10 * time.Second
	for _, p := range pairs {
		for _, order := range [][2]string{{p[0], p[1]}, {p[1], p[0]}} {
			held, err := a.Mutex(order[0], dlock.WithTTL(ttl)).TryLock(t.Context())
			if errors.Is(err, dlock.ErrInvalidName) {
				break
			}
			if err != nil {
				t.Errorf("TryLock(%q): %v", order[0], err)
				break
			}
			other, err := b.Mutex(order[1], dlock.WithTTL(ttl)).TryLock(t.Context())
			switch {
			case errors.Is(err, dlock.ErrInvalidName):
			case err != nil:
				t.Errorf("with %q held, TryLock(%q) = %v; want the lock: distinct names must be distinct locks", order[0], order[1], err)
			default:
				if err := other.Unlock(t.Context()); err != nil {
					t.Errorf("Unlock(%q): %v", order[1], err)
				}
			}
			if err := held.Unlock(t.Context()); err != nil {
				t.Errorf("Unlock(%q): %v", order[0], err)
			}
		}
	}
}
