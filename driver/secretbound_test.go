package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlock/dlock/driver"
)

// password_file=/dev/zero read without end and exhausted memory: the read
// is bounded, and the error says why.
func TestPasswordFileIsBounded(t *testing.T) {
	_, err := driver.ParseURL("redis://app@127.0.0.1:1?password_file=/dev/zero")
	if !errors.Is(err, driver.ErrInvalidURL) || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("ParseURL(password_file=/dev/zero) = %v; want ErrInvalidURL saying the file is too large", err)
	}
}

// A port out of range is a bad URL, not a dial error after retries.
func TestPortOutOfRange(t *testing.T) {
	for _, raw := range []string{"redis://[::1]:99999", "redis://127.0.0.1:0", "redlock://127.0.0.1:6379,127.0.0.1:65536", "etcd://127.0.0.1:1,127.0.0.1:70000/p"} {
		if _, err := driver.ParseURL(raw); !errors.Is(err, driver.ErrInvalidURL) || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("ParseURL(%s) = %v; want ErrInvalidURL for the port", raw, err)
		}
	}
	for _, raw := range []string{"redis://[::1]:6379", "redis://127.0.0.1:65535", "mem://x", "redlock://a:1,b:2"} {
		if _, err := driver.ParseURL(raw); err != nil {
			t.Errorf("ParseURL(%s) = %v", raw, err)
		}
	}
}

// A fragment went unread by every backend, with whatever a "#" cut off
// (etcd://host/p#zq9 opened the prefix "p"): it is refused, without
// repeating it, since it may be a piece of a value.
func TestFragmentIsRefused(t *testing.T) {
	for _, raw := range []string{"etcd://127.0.0.1:2379/p#zq9", "redis://127.0.0.1:6379/0?password_file=/x#zq9", "zk://h:2181#", "mem://#zq9"} {
		_, err := driver.ParseURL(raw)
		if !errors.Is(err, driver.ErrInvalidURL) || !strings.Contains(err.Error(), "fragment") {
			t.Errorf("ParseURL(%s) = %v; want ErrInvalidURL for the fragment", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "zq9") {
			t.Errorf("ParseURL(%s) = %v; repeats the fragment", raw, err)
		}
	}
}

// A query pair url.Values cannot read (a ';', a bad escape) was dropped
// without a word: zk://…?acl=digest:ops:HASH:rd; opened, and the grant
// named nobody (a re-test pass). It is refused, without repeating it.
func TestUnreadableQueryIsRefused(t *testing.T) {
	for _, raw := range []string{"zk://h:2181/c?acl=digest:ops:zq9:rd;", "zk://h:2181/c?acl=digest:ops:zq9:rd,%zz",
		"redis://127.0.0.1:6379/0?dial_timeout=1s;zq9", `redis://h:6379/0?password=%"zq9`} {
		_, err := driver.ParseURL(raw)
		if !errors.Is(err, driver.ErrInvalidURL) || !strings.Contains(err.Error(), "query parameter") {
			t.Errorf("ParseURL(%s) = %v; want ErrInvalidURL for the query", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "zq9") {
			t.Errorf("ParseURL(%s) = %v; repeats the query", raw, err)
		}
	}
}
