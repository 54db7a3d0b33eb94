package openfuzz

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	_ "github.com/dlock/dlock/etcdlock"
	_ "github.com/dlock/dlock/memcachedlock"
	_ "github.com/dlock/dlock/memlock"
	_ "github.com/dlock/dlock/mysqllock"
	_ "github.com/dlock/dlock/natslock"
	_ "github.com/dlock/dlock/pglock"
	_ "github.com/dlock/dlock/redislock"
	_ "github.com/dlock/dlock/redlock"
	_ "github.com/dlock/dlock/zklock"
)

// openSafely opens rawURL with a context that has already ended, so that no
// backend gets as far as talking to a server, after checking that every
// address the URL names is on loopback (fuzzed hosts must never leave the
// machine). It reports false if rawURL names anything else.
func openSafely(t *testing.T, rawURL string) (error, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	u, err := driver.ParseURLContext(ctx, rawURL)
	if err == nil {
		for _, h := range driver.Hosts(u) {
			if !loopback(h) {
				return nil, false
			}
		}
		for k := range u.Query() {
			k = strings.ToLower(k)
			for _, w := range []string{"addr", "host", "sentinel", "server", "endpoint", "node", "peer", "socket", "unix"} {
				if strings.Contains(k, w) {
					return nil, false
				}
			}
		}
	}
	c, err := dlock.Open(ctx, rawURL)
	if err == nil {
		_ = c.Close()
	}
	return err, true
}

// loopback reports whether host (with or without a port) is empty or a
// loopback address.
func loopback(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if h == "" || h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// FuzzOpenNoPanic: no URL makes Open panic, for any registered scheme, and
// every failure is a dlock error, not a crash or a raw nil.
func FuzzOpenNoPanic(f *testing.F) {
	for _, s := range dlock.Schemes() {
		for _, rest := range []string{
			"", "/", "/m", "/x/y", "?", "127.0.0.1:1", "127.0.0.1:1/", "127.0.0.1:1,", ",127.0.0.1:1",
			"127.0.0.1:1/0?pool_size=-1", "127.0.0.1:1/0?pool_size=100000000", "127.0.0.1:1?pool_size=2147483648",
			"127.0.0.1:1/0?min_idle_conns=-1", "127.0.0.1:1/0?max_idle_conns=-5&max_active_conns=-1",
			"127.0.0.1:1/0?max_retries=-2", "127.0.0.1:1?pool_max_conns=-1", "127.0.0.1:1?pool_max_conns=100000000",
			"127.0.0.1:1?max_open_conns=-1", "127.0.0.1:1?max_idle_conns=100000000", "127.0.0.1:1?session_timeout=1ns",
			"127.0.0.1:1?session_timeout=-1s", "127.0.0.1:1?max_held=-1", "127.0.0.1:1?max_held=9223372036854775807",
			"127.0.0.1:1?prefix=a%20b", "127.0.0.1:1?prefix=", "127.0.0.1:1?timeout=-1s", "127.0.0.1:1?dial_timeout=-1s",
			"[::1]:1/db", "[::1", "localhost:99999", "127.0.0.1:1?%zz", "127.0.0.1:1/%zz",
		} {
			f.Add(s + "://" + rest)
		}
	}
	f.Fuzz(func(t *testing.T, rawURL string) {
		if !utf8.ValidString(rawURL) {
			return
		}
		err, ok := openSafely(t, rawURL)
		if !ok {
			return
		}
		var pe interface{ Error() string }
		if err != nil && errors.As(err, &pe) && pe.Error() == "" {
			t.Fatalf("Open(%q): an error with no text", rawURL)
		}
	})
}

// FuzzOpenNoSecret: whatever the password holds (a / ? # @ % unescaped
// included) and whatever follows it, no error of Open shows it, or a piece
// of it, for any registered scheme.
func FuzzOpenNoSecret(f *testing.F) {
	for i := range dlock.Schemes() {
		for _, pw := range []string{"Pa55/word9", "Pa55#word9", "Pa55?word9", "1234/word9", "Pa55@word9", "S3cr%zzet", "Pa55 word9", "Pa55:word9"} {
			for _, rest := range []string{"127.0.0.1:1/db", "127.0.0.1:1", "127.0.0.1:1,127.0.0.1:2/m?x=1", "", "/m", "[::1]:1?prefix=a"} {
				f.Add(uint8(i), pw, rest)
			}
		}
	}
	schemes := dlock.Schemes()
	f.Fuzz(func(t *testing.T, si uint8, pw, rest string) {
		if !utf8.ValidString(pw) || !utf8.ValidString(rest) || len(pw) == 0 {
			return
		}
		scheme := schemes[int(si)%len(schemes)]
		rawURL := scheme + "://app:" + pw + "@" + rest
		err, ok := openSafely(t, rawURL)
		if !ok || err == nil {
			return
		}
		// The same URL with every letter and digit of the password turned
		// to Q: a piece of the password its error shows too is the error's
		// own text (or the rest of the URL's), not a leak.
		masked := strings.Map(func(r rune) rune {
			if strings.ContainsRune("/?#@%:", r) {
				return r
			}
			return 'Q'
		}, pw)
		other, _ := openSafely(t, scheme+"://app:"+masked+"@"+rest)
		otherText := ""
		if other != nil {
			otherText = other.Error()
		}
		for _, piece := range strings.FieldsFunc(pw, func(r rune) bool { return strings.ContainsRune("/?#@%:", r) }) {
			if len(piece) < 4 || strings.Contains(rest, piece) || strings.Contains(otherText, piece) || strings.Contains(scheme+"://app:", piece) {
				continue
			}
			if strings.Contains(err.Error(), piece) {
				t.Fatalf("Open(%q) = %v: shows %q of the password", rawURL, err, piece)
			}
		}
	})
}
