package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlock/dlock/driver"
)

// A password holding / ? # or @ unescaped must not leak, in whole or in
// part, through ParseURL's error: url.Parse took "app:Pa55" for a host and
// said `invalid port ":Pa55" after host`.
func TestParseURLNeverQuotesUserinfo(t *testing.T) {
	for _, tc := range []struct{ url, secret string }{
		{"redis://app:Pa55/word9@host:1/db", "Pa55"},
		{"redis://app:Pa55/word9@host:1/db", "word9"},
		{"redis://app:1234/word9@host:1/db", "1234"},
		{"redis://app:1234/word9@host:1/db", "word9"},
		{"postgres://app:Pa55#word9@host:1/db", "Pa55"},
		{"postgres://app:Pa55#word9@host:1/db", "word9"},
		{"mysql://app:Pa55?word9@host:1/db", "Pa55"},
		{"mysql://app:12?word9@host:1/db", "word9"},
		{"zk://app:Pa%zz55@host:1/db", "Pa"},
		{"etcd://app:Pa55 x@host:1", "Pa55"},
		{"etcd://app:Pa55@h st:1", "Pa55"},
		{"memcached://app:S3cr%t@127.0.0.1:1", "S3cr"},
		// No "@": the password reads as a port (a re-test pass).
		{"redis://:Pw9xSecret", "Pw9x"},
		{"redis://app:Pw9xSecret", "Pw9x"},
		{"postgres://app:Pw9xSecret/db", "Pw9x"},
		{"redis://app:my", ":my"}, // "redis://app:my Pw9xSecret@h:1" cut at the space by a list
		// A '"' in the password: url.Parse escapes it in its quote, and
		// the quotes paired one by one let the tail out (a re-test pass).
		{`redis://:Zq"7kLmN3pQrS9tV`, "7kLm"},
		{`redis://:a"b"cSECRETTAIL`, "SECRET"},
		{`redis://[::1:pa"ssWORD]:6379`, "ssWORD"},
		{"redis://:98765432101", "98765"}, // digits past a port's range
		{"redis://h:1:98765432101", "98765"},
	} {
		_, err := driver.ParseURL(tc.url)
		if !errors.Is(err, driver.ErrInvalidURL) {
			t.Errorf("ParseURL(%s) = %v; want ErrInvalidURL", tc.url, err)
			continue
		}
		if strings.Contains(err.Error(), tc.secret) {
			t.Errorf("ParseURL(%s) = %v; shows %q", tc.url, err, tc.secret)
		}
	}
	// A "@" in a query value is not user info, and a URL without user info
	// still says what was wrong where.
	for _, ok := range []string{"mysql://127.0.0.1:1/db?user=a@b", "redis://h:1?client_name=a@b.c", "redis://a:1?x=b@c/0",
		"redis://127.0.0.1:1?client_name=svc@pod:8080", "mysql://127.0.0.1:1/db?user=a@b:1"} {
		if _, err := driver.ParseURL(ok); err != nil {
			t.Errorf("ParseURL(%s) with @ in a query value: %v", ok, err)
		}
	}
	// A bad port is named as such, but not quoted: "host:port" cannot be
	// told from "user:password" that lost its "@host".
	if _, err := driver.ParseURL("redis://host:port/0"); err == nil || !strings.Contains(err.Error(), "invalid port") {
		t.Errorf("ParseURL(redis://host:port/0) = %v; want it to say the port is bad", err)
	}
}
