package driver

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/dlock/dlock/internal/smallfile"
	"github.com/dlock/dlock/internal/urlsecret"
)

// PasswordFileParam is the URL parameter that names a file holding the
// password, so that it need not be written in the URL (and so on a command
// line or in a process list): "redis://app@host:6379?password_file=/run/secrets/redis".
// ParseURL reads the file (one line; a trailing newline is dropped), puts
// the password in the URL's user info and removes the parameter, so every
// backend gets it.
const PasswordFileParam = urlsecret.PasswordFileParam

// resolvePasswordFile applies PasswordFileParam to u. Its errors name the
// file, never its content.
func resolvePasswordFile(ctx context.Context, u *url.URL) error {
	q := u.Query()
	path, ok := q.Get(PasswordFileParam), q.Has(PasswordFileParam)
	if !ok {
		return nil
	}
	if _, has := u.User.Password(); has {
		return fmt.Errorf("give the password in the URL or %s=, not both", PasswordFileParam)
	}
	if path == "" {
		return fmt.Errorf("%s= is empty", PasswordFileParam)
	}
	b, err := smallfile.Read(ctx, path, smallfile.MaxSecret) // a wrong path may be /dev/zero
	if err != nil {
		hint := ""
		if strings.Contains(path, " ") && strings.Contains(u.RawQuery, "+") {
			hint = " (a + in a URL's query reads as a space: write a + in a path as %2B)"
		}
		return fmt.Errorf("%s %s: %v%s", PasswordFileParam, path, err, hint)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" || strings.ContainsAny(pw, "\r\n") {
		return fmt.Errorf("%s %s: want the password alone on one line", PasswordFileParam, path)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	q.Del(PasswordFileParam)
	u.RawQuery = q.Encode()
	return nil
}
