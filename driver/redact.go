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

// RedactError returns err with the secrets of u hidden from its text (see
// RedactText), or err itself if its text shows none. The cause stays
// reachable for errors.Is and errors.As. A nil err stays nil.
func RedactError(err error, u *url.URL) error {
	if err == nil {
		return nil
	}
	msg := RedactText(err.Error(), u)
	if msg == err.Error() {
		return err
	}
	return &redactedError{err: err, msg: msg}
}

// redactedError is an error whose text hides a URL's secrets.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
