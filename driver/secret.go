package driver

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// PasswordFileParam is the URL parameter that names a file holding the
// password, so that it need not be written in the URL (and so on a command
// line or in a process list): "redis://app@host:6379?password_file=/run/secrets/redis".
// ParseURL reads the file (one line; a trailing newline is dropped), puts
// the password in the URL's user info and removes the parameter, so every
// backend gets it.
const PasswordFileParam = "password_file"

// resolvePasswordFile applies PasswordFileParam to u. Its errors name the
// file, never its content.
func resolvePasswordFile(u *url.URL) error {
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
	b, err := os.ReadFile(path)
	if err != nil {
		if pe, ok := err.(*os.PathError); ok {
			err = pe.Err // the path is in the message already
		}
		return fmt.Errorf("%s %s: %v", PasswordFileParam, path, err)
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

// secretParam reports whether a URL parameter holds a secret by its name,
// as sentinel_password= or password= do.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	return n != PasswordFileParam && (strings.Contains(n, "password") || strings.Contains(n, "secret"))
}

// Secrets returns the secrets written in u: the user info's password and
// the values of parameters named like one (sentinel_password=, password=).
// Errors and logs must not show them.
func Secrets(u *url.URL) []string {
	var s []string
	if pw, ok := u.User.Password(); ok && pw != "" {
		s = append(s, pw)
	}
	for k, vs := range u.Query() {
		if secretParam(k) {
			for _, v := range vs {
				if v != "" {
					s = append(s, v)
				}
			}
		}
	}
	return s
}

// HasSecret reports whether rawURL itself holds a password (in its user
// info or a parameter named like one). A password_file= parameter does not
// count: the password stays in the file.
func HasSecret(rawURL string) bool {
	if u, err := url.Parse(rawURL); err == nil {
		return len(Secrets(u)) > 0
	}
	// Unparsable: assume user info with a colon holds a password.
	if i := strings.Index(rawURL, "://"); i >= 0 {
		rest := rawURL[i+3:]
		if j := strings.LastIndex(rest, "@"); j >= 0 {
			return strings.Contains(rest[:j], ":")
		}
	}
	return false
}

// Redact returns u as text with its password and its secret parameters'
// values replaced by "xxxxx": url.URL.Redacted masks the password only.
func Redact(u *url.URL) string {
	c := *u
	q := c.Query()
	changed := false
	for k, vs := range q {
		if secretParam(k) {
			for i := range vs {
				vs[i] = "xxxxx"
			}
			changed = true
		}
	}
	if changed {
		c.RawQuery = q.Encode()
	}
	return c.Redacted()
}
