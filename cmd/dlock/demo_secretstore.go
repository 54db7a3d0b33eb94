package main

import (
	"context"
	"net/url"

	"github.com/dlock/dlock/driver"
)

// secretStore is a stock store whose errors hide its URL's secrets.
type secretStore struct {
	st stockStore
	u  *url.URL
}

func (s secretStore) reset(ctx context.Context, key string, v int) error {
	return hideSecrets(s.st.reset(ctx, key, v), s.u)
}

func (s secretStore) set(ctx context.Context, key string, v int) error {
	return hideSecrets(s.st.set(ctx, key, v), s.u)
}

func (s secretStore) get(ctx context.Context, key string) (int, int64, error) {
	v, version, err := s.st.get(ctx, key)
	return v, version, hideSecrets(err, s.u)
}

func (s secretStore) cas(ctx context.Context, key string, version int64, v int) (bool, error) {
	ok, err := s.st.cas(ctx, key, version, v)
	return ok, hideSecrets(err, s.u)
}

func (s secretStore) fencedSet(ctx context.Context, key string, v int, token uint64) (bool, error) {
	ok, err := s.st.fencedSet(ctx, key, v, token)
	return ok, hideSecrets(err, s.u)
}

func (s secretStore) close() error { return hideSecrets(s.st.close(), s.u) }

// hideSecrets returns err with u's secrets hidden from its text; the cause
// stays reachable for errors.Is and errors.As. A nil err stays nil.
func hideSecrets(err error, u *url.URL) error {
	if err == nil {
		return nil
	}
	msg := driver.RedactText(err.Error(), u)
	if msg == err.Error() {
		return err
	}
	return &hiddenSecrets{err: err, msg: msg}
}

// hiddenSecrets is an error whose text hides a URL's secrets.
type hiddenSecrets struct {
	err error
	msg string
}

func (e *hiddenSecrets) Error() string { return e.msg }
func (e *hiddenSecrets) Unwrap() error { return e.err }
