package driver

import (
	"net/url"

	"github.com/dlock/dlock/internal/urlsecret"
)

// Redacted returns u as text with its password and the values of secret
// query parameters (TLS key files and passwords, other passwords, tokens)
// replaced by "xxxxx", for errors and logs. url.URL.Redacted masks the
// password only.
func Redacted(u *url.URL) string { return urlsecret.Redact(u) }

// RedactText replaces every secret of u (its password and the values of
// secret parameters, as they are and escaped) in text by "xxxxx".
func RedactText(text string, u *url.URL) string { return urlsecret.RedactText(text, u) }
