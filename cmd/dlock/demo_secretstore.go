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
	return driver.RedactError(s.st.reset(ctx, key, v), s.u)
}

func (s secretStore) set(ctx context.Context, key string, v int) error {
	return driver.RedactError(s.st.set(ctx, key, v), s.u)
}

func (s secretStore) get(ctx context.Context, key string) (int, int64, error) {
	v, version, err := s.st.get(ctx, key)
	return v, version, driver.RedactError(err, s.u)
}

func (s secretStore) cas(ctx context.Context, key string, version int64, v int) (bool, error) {
	ok, err := s.st.cas(ctx, key, version, v)
	return ok, driver.RedactError(err, s.u)
}

func (s secretStore) fencedSet(ctx context.Context, key string, v int, token uint64) (bool, error) {
	ok, err := s.st.fencedSet(ctx, key, v, token)
	return ok, driver.RedactError(err, s.u)
}

func (s secretStore) close() error { return driver.RedactError(s.st.close(), s.u) }
