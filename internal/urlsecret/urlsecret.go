// Package urlsecret knows which parts of a backend URL are secrets (its
// password, TLS key files and passwords, other passwords and tokens) and
// hides them from errors and logs. Package driver exports what backends and
// package dlock need of it (Redacted, RedactText, PasswordFileParam); the
// rest (Secrets, HasSecret) serves dlock's own packages and command.
package urlsecret

import (
	"net/url"
	"strings"
)

// PasswordFileParam is the URL parameter that names a file holding the
// password (see driver.PasswordFileParam).
const PasswordFileParam = "password_file"

// secretParams are query parameters whose values are secrets, or say where
// one is kept: TLS client keys (key, sslkey), files holding a password.
// Parameters whose names contain "password", "secret" or "token" (such as
// sentinel_password, sslpassword) are secret too.
var secretParams = []string{"key", "sslkey", PasswordFileParam}

// secretParam reports whether the URL parameter name holds a secret.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, p := range secretParams {
		if n == p {
			return true
		}
	}
	return strings.Contains(n, "password") || strings.Contains(n, "secret") || strings.Contains(n, "token")
}

// Redact returns u as text with its password and the values of secret
// query parameters (TLS key files and passwords, other passwords, tokens)
// replaced by "xxxxx", for errors and logs. url.URL.Redacted masks the
// password only.
func Redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	if v.RawQuery != "" {
		q := v.Query()
		hidden := false
		for k, vs := range q {
			if secretParam(k) {
				for i := range vs {
					vs[i] = "xxxxx"
				}
				hidden = true
			}
		}
		if hidden {
			v.RawQuery = q.Encode()
		}
	}
	return v.Redacted()
}

// Secrets returns the texts Redact hides, as they are and as they look
// escaped, so that an error's text can be stripped of them.
func Secrets(u *url.URL) []string {
	if u == nil {
		return nil
	}
	var s []string
	if pw, ok := u.User.Password(); ok && pw != "" {
		s = append(s, pw, url.QueryEscape(pw), url.PathEscape(pw))
	}
	for k, vs := range u.Query() {
		if !secretParam(k) {
			continue
		}
		for _, v := range vs {
			if v != "" {
				s = append(s, v, url.QueryEscape(v))
			}
		}
	}
	return s
}

// RedactText replaces every secret of u (see Secrets) in text by "xxxxx".
func RedactText(text string, u *url.URL) string {
	for _, s := range Secrets(u) {
		text = strings.ReplaceAll(text, s, "xxxxx")
	}
	return text
}

// HasSecret reports whether rawURL itself holds a password or token (in its
// user info or a parameter named like one), as a warning about passwords on
// command lines needs. A file's path (password_file=, key=) does not count:
// the secret stays in the file.
func HasSecret(rawURL string) bool {
	if u, err := url.Parse(rawURL); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			return true
		}
		for k, vs := range u.Query() {
			n := strings.ToLower(k)
			if secretParam(n) && n != PasswordFileParam && n != "key" && n != "sslkey" && len(vs) > 0 && vs[0] != "" {
				return true
			}
		}
		return false
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
