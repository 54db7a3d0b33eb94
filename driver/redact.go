package driver

import (
	"net/url"
	"strings"
)

// secretParams are query parameters whose values are secrets, or say where
// one is kept: TLS client keys (key, sslkey), their passwords, passwords
// and tokens, and files holding them.
var secretParams = []string{"key", "sslkey", "sslpassword", "password", "password_file", "token"}

// Redacted returns u as text with its password and the values of secret
// query parameters (TLS key files and passwords, tokens) replaced by
// "xxxxx", for errors and logs.
func Redacted(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	if v.RawQuery != "" {
		q := v.Query()
		hidden := false
		for _, p := range secretParams {
			if q.Has(p) {
				q.Set(p, "xxxxx")
				hidden = true
			}
		}
		if hidden {
			v.RawQuery = q.Encode()
		}
	}
	return v.Redacted()
}

// Secrets returns the texts Redacted hides, as they are and as they look
// escaped, so that an error's text can be stripped of them.
func Secrets(u *url.URL) []string {
	if u == nil {
		return nil
	}
	var s []string
	if pw, ok := u.User.Password(); ok && pw != "" {
		s = append(s, pw, url.QueryEscape(pw), url.PathEscape(pw))
	}
	q := u.Query()
	for _, p := range secretParams {
		for _, v := range q[p] {
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
