package memcachedlock

import (
	"errors"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/testserver"
)

// A grant whose counter moved between its increment and its add gets a
// fresh token (latestToken). Inspect may have shown the first one in
// between, and a force naming it must drop the hold: it used to drop
// nothing.
func TestForceNamesFirstToken(t *testing.T) {
	srv := testserver.Memcached(t)
	mc := memcache.New(srv.Addr())
	d, err := newDriver(mc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	r := driver.Request{Name: "first-token", Owner: "owner-a", TTL: 10 * time.Second, Kind: driver.Exclusive}
	key := d.key(r.Name)
	tok, err := d.nextToken(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.Add(&memcache.Item{Key: key, Value: encode(value{Owner: r.Owner, Holds: 1, Token: tok}, r.TTL), Expiration: expiration(r.TTL)}); err != nil {
		t.Fatal(err)
	}
	info, err := d.Inspect(ctx, r.Name)
	if err != nil || info.Token != tok {
		t.Fatalf("Inspect: %+v, %v; want token %d", info, err, tok)
	}
	if _, err := d.nextToken(key); err != nil { // a contender's increment
		t.Fatal(err)
	}
	fresh, err := d.latestToken(key, r, tok)
	if err != nil || fresh <= tok {
		t.Fatalf("latestToken: %d, %v; want a token above %d", fresh, err, tok)
	}
	if err := d.ForceRelease(ctx, r.Name, tok+100); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Get(key); err != nil {
		t.Fatalf("a force naming another token dropped the hold: %v", err)
	}
	if err := d.ForceRelease(ctx, r.Name, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Get(key); !errors.Is(err, memcache.ErrCacheMiss) {
		t.Fatalf("the hold Inspect showed with token %d is still there after a force naming it: %v", tok, err)
	}
}
