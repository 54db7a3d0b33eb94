package driver_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock/dlock/driver"
)

func TestPasswordFile(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := driver.ParseURL("zk://app@h1:2181,h2:2181/chroot?session_timeout=10s&password_file=" + pw)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := u.User.Password(); p != "s3cret" || u.User.Username() != "app" || u.Query().Has("password_file") ||
		u.Query().Get("session_timeout") != "10s" || len(driver.Hosts(u)) != 2 {
		t.Errorf("parsed %s", u.Redacted())
	}
	if s := driver.Redacted(u); strings.Contains(s, "s3cret") {
		t.Errorf("Redacted shows the password: %s", s)
	}
	two := filepath.Join(dir, "two")
	_ = os.WriteFile(two, []byte("a\nb\n"), 0o600)
	for _, bad := range []string{
		"redis://h:1?password_file=" + filepath.Join(dir, "none"),
		"redis://u:s3cret@h:1?password_file=" + pw,
		"redis://h:1?password_file=",
		"redis://h:1?password_file=" + two,
	} {
		_, err := driver.ParseURL(bad)
		if !errors.Is(err, driver.ErrInvalidURL) || !strings.Contains(err.Error(), "password_file") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// A + in a query is a space (Go's and every URL parser's rule), so a
// password file whose path has a + is found only as %2B; the error says so
// instead of naming a path with a space the user never wrote.
func TestPasswordFilePlus(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "a+b")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := driver.ParseURL("redis://h:1?password_file=" + pw)
	if !errors.Is(err, driver.ErrInvalidURL) || !strings.Contains(err.Error(), "%2B") {
		t.Errorf("a + in the path: %v, want a hint to write %%2B", err)
	}
	u, err := driver.ParseURL("redis://h:1?password_file=" + strings.ReplaceAll(pw, "+", "%2B"))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := u.User.Password(); p != "s3cret" {
		t.Errorf("%%2B in the path: password %q", p)
	}
	if _, err := driver.ParseURL("redis://h:1?password_file=" + filepath.Join(dir, "none")); err == nil || strings.Contains(err.Error(), "%2B") {
		t.Errorf("a missing path without +: %v, want no hint", err)
	}
}
