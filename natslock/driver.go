package natslock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	mutexPrefix = "m."
	// markerTTL is how long a purge marker stays: watchers see it as it
	// comes, so it need not stay long.
	markerTTL = time.Minute
	// kindsNote says why there are no read-write locks or semaphores.
	kindsNote = "natslock offers no read-write locks or semaphores (yet): JetStream KV has no multi-key " +
		"transaction, so they need a layout of their own (a key per permit; readers that re-check a writer's key), " +
		"which is not built"
)

type natsDriver struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	bucket string
	owned  bool
	// life ends at Close: every call's ctx is bound to it (bind), so
	// nothing waits on after Close, even on a connection the driver does
	// not own.
	life context.Context
	kill context.CancelFunc

	mu       sync.Mutex
	created  time.Time // the bucket's stream's creation time, from Open
	maxToken uint64    // the greatest token this driver has seen
	recheck  bool      // the bucket was reported missing: check it was not re-created
	stale    bool      // the bucket was re-created: refuse to grant
}

// value is what a lock key holds.
type value struct {
	Owner string `json:"o"`
	Label string `json:"l,omitempty"`
	ID    string `json:"id"`          // the hold's random id
	TTL   int64  `json:"ttl"`         // ms
	Token uint64 `json:"t,omitempty"` // the grant's revision, stored by every write after the grant
	W     bool   `json:"w,omitempty"` // waiters are queued: release hands over
	Q     uint64 `json:"q,omitempty"` // a queue key's place: the revision of its first write
	H     bool   `json:"h,omitempty"` // handed over, not yet confirmed by its waiter (see takeBack)
}

// hold is the driver's state of a held lock.
type hold struct {
	mu  sync.Mutex
	key string
	rev uint64 // the key's last revision this hold wrote
	val value
}

// Lease is the NATS view of a held lock, reached with dlock's Lease.As.
type Lease struct {
	Key   string // the lock's key in the bucket
	Token uint64 // the revision of the write that granted it (create or handover)
}

func newDriver(ctx context.Context, nc *nats.Conn, opts Options) (*natsDriver, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := checkBucket(opts.Bucket); err != nil {
		return nil, fmt.Errorf("natslock: %w: %v", dlock.ErrInvalidConfig, err)
	}
	if opts.Bucket == "" {
		opts.Bucket = DefaultBucket
	}
	if !versionAtLeast(nc.ConnectedServerVersion(), 2, 11) {
		return nil, fmt.Errorf("natslock: %w: nats-server %s is too old: per-key TTLs need 2.11 or later",
			dlock.ErrInvalidConfig, nc.ConnectedServerVersion())
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("natslock: jetstream: %w", err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return nil, fmt.Errorf("natslock: %w: JetStream is not enabled on the server or for this account: %v",
				dlock.ErrInvalidConfig, err)
		}
		return nil, fmt.Errorf("natslock: jetstream: %w", err)
	}
	d := &natsDriver{nc: nc, js: js, bucket: opts.Bucket, owned: opts.CloseConn}
	d.life, d.kill = context.WithCancel(context.Background())
	kv, err := js.KeyValue(ctx, opts.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && !opts.NoCreate {
		kv, err = d.create(ctx, opts)
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("natslock: %w: bucket %q does not exist (create=false): make it with dlock migrate and a URL without create=false, as a user who may create streams",
			dlock.ErrInvalidConfig, opts.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("natslock: bucket %q: %w", opts.Bucket, err)
	}
	d.kv = kv
	if err := d.checkBucket(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// create makes the bucket with per-key TTLs.
func (d *natsDriver) create(ctx context.Context, opts Options) (jetstream.KeyValue, error) {
	kv, err := d.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: opts.Bucket, History: 1,
		Replicas: max(opts.Replicas, 1), Storage: opts.Storage, LimitMarkerTTL: markerTTL,
		Description: "dlock locks"})
	if errors.Is(err, jetstream.ErrBucketExists) { // made meanwhile
		return d.js.KeyValue(ctx, opts.Bucket)
	}
	return kv, err
}

// checkBucket refuses a bucket without per-key TTLs and records its
// stream's creation time.
func (d *natsDriver) checkBucket(ctx context.Context) error {
	st, err := d.kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("natslock: bucket %q: %w", d.bucket, err)
	}
	if st.LimitMarkerTTL() <= 0 {
		return fmt.Errorf("natslock: %w: bucket %q has no limit markers (LimitMarkerTTL): its keys cannot expire one by one",
			dlock.ErrInvalidConfig, d.bucket)
	}
	created := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Created
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.created.IsZero() && !created.Equal(d.created) {
		d.stale = true
	}
	if d.created.IsZero() {
		d.created = created
	}
	d.recheck = false
	return nil
}

// Migrate creates the bucket if it is missing.
func (d *natsDriver) Migrate(ctx context.Context) error {
	ctx, cancel := d.bind(ctx)
	defer cancel()
	_, err := d.create(ctx, Options{Bucket: d.bucket})
	return d.closedErr(err)
}

// bind returns ctx, also ended by Close.
func (d *natsDriver) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// bindTimeout is bind with a timeout: one derived ctx, not two.
func (d *natsDriver) bindTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	stop := context.AfterFunc(d.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// detached returns a ctx for cleanup that must outlive ctx's end: bounded
// by timeout and by Close, not by ctx.
func (d *natsDriver) detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return d.bindTimeout(context.WithoutCancel(ctx), timeout)
}

// closed reports whether the driver or its connection has closed: no call
// can reach the store any more.
func (d *natsDriver) closed() bool {
	return d.life.Err() != nil || d.nc.IsClosed()
}

// closedErr turns err into one wrapping dlock.ErrClosed (a permanent
// error: nothing retries it) if it came from a closed driver or
// connection.
func (d *natsDriver) closedErr(err error) error {
	if err != nil && !errors.Is(err, dlock.ErrClosed) && (d.closed() || errors.Is(err, nats.ErrConnectionClosed)) {
		return fmt.Errorf("%w: %w", dlock.ErrClosed, err)
	}
	return err
}

func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// key maps any name to a valid key: base64url has only key characters.
func key(name string) string {
	return mutexPrefix + base64.RawURLEncoding.EncodeToString([]byte(name))
}

func nameOf(k string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(k, mutexPrefix))
	return string(b), err == nil && strings.HasPrefix(k, mutexPrefix)
}

func (d *natsDriver) Caps() driver.Caps {
	// The longest name whose key fits a subject well inside the server's
	// 4 KiB control line.
	return driver.Caps{MaxNameLen: 1024, MinTTL: time.Second, TTLResolution: time.Second, Blocking: true,
		KindsNote: kindsNote}
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// noteErr marks the bucket for a check after an error saying it is gone.
func (d *natsDriver) noteErr(err error) error {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
		d.mu.Lock()
		d.recheck = true
		d.mu.Unlock()
	}
	return err
}

// ForceRelease purges the lock's key, whoever holds it.
// ForceRelease purges the lock's key whoever holds it (token 0), or only
// a holder's whose token is token; the purge is checked by the revision
// read, so a later holder is kept.
func (d *natsDriver) ForceRelease(ctx context.Context, name string, token uint64) error {
	ctx, cancel := d.bind(ctx)
	defer cancel()
	e, err := d.kv.Get(ctx, key(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("natslock: force release %q: %w", name, d.closedErr(err))
	}
	if token != 0 && describe(name, e).Token != token {
		return nil
	}
	if err := d.kv.Purge(ctx, e.Key(), jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(markerTTL)); err != nil {
		return fmt.Errorf("natslock: force release %q: %w", name, d.closedErr(err))
	}
	return nil
}

func (d *natsDriver) Inspect(ctx context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name}
	ctx, cancel := d.bind(ctx)
	defer cancel()
	e, err := d.kv.Get(ctx, key(name))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		// Free, and waiters may still be queued on it: a holder that died
		// leaves them there until the head takes it.
	case err != nil:
		return info, fmt.Errorf("natslock: inspect %q: %w", name, d.closedErr(d.noteErr(err)))
	default:
		info = describe(name, e)
	}
	if _, n, _, err := d.queue(ctx, name); err == nil {
		info.Waiters = n
	}
	return info, nil
}

func describe(name string, e jetstream.KeyValueEntry) driver.Info {
	info := driver.Info{Name: name}
	var v value
	if json.Unmarshal(e.Value(), &v) != nil {
		info.Notes = append(info.Notes, "the key does not hold a dlock value")
		return info
	}
	info.Held, info.Owner, info.Label, info.Holds, info.Token = true, v.Owner, v.Label, 1, tokenOf(e, v)
	info.TTL = max(time.Until(e.Created().Add(time.Duration(v.TTL)*time.Millisecond)), 0)
	return info
}

// Close ends every call in flight (see bind) and, if the driver owns the
// connection, closes it.
func (d *natsDriver) Close() error {
	d.kill()
	if d.owned {
		d.nc.Close()
	}
	return nil
}

// As sets **nats.Conn and jetstream.KeyValue targets.
func (d *natsDriver) As(target any) bool {
	switch p := target.(type) {
	case **nats.Conn:
		*p = d.nc
		return true
	case *jetstream.KeyValue:
		*p = d.kv
		return true
	}
	return false
}

// As sets **Lease targets.
func (h *hold) As(target any) bool {
	if p, ok := target.(**Lease); ok {
		*p = &Lease{Key: h.key, Token: h.val.Token}
		return true
	}
	return false
}

// logHandlers send the connection's events to the logger.
func logHandlers(l *slog.Logger) []nats.Option {
	return []nats.Option{
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err == nil || nc.IsClosed() { // Close's own disconnect: nothing went wrong
				l.Debug("natslock: connection closed")
				return
			}
			l.Warn("natslock: disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			l.Info("natslock: reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			l.Warn("natslock: async error", "err", err)
		}),
	}
}
