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
	kindsNote = "natslock keeps one key per lock (no read-write locks or semaphores yet)"
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
	Token uint64 `json:"t,omitempty"` // the grant's revision, once renewed
	W     bool   `json:"w,omitempty"` // waiters are queued: release hands over
	Q     uint64 `json:"q,omitempty"` // a queue key's place: the revision of its first write
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

// detached returns a ctx for cleanup that must outlive ctx's end: bounded
// by timeout and by Close, not by ctx.
func (d *natsDriver) detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := d.bind(context.WithoutCancel(ctx))
	ctx, cancel2 := context.WithTimeout(ctx, timeout)
	return ctx, func() { cancel2(); cancel() }
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

// fresh checks a new grant's token against the bucket's history: see
// "Fencing tokens" in the package doc.
func (d *natsDriver) fresh(ctx context.Context, tok uint64) error {
	d.mu.Lock()
	check := d.recheck || tok <= d.maxToken
	d.mu.Unlock()
	if check {
		if err := d.checkBucket(ctx); err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stale {
		return fmt.Errorf("natslock: %w: bucket %q was deleted and created again: its tokens started over; open the client again",
			dlock.ErrInvalidConfig, d.bucket)
	}
	d.maxToken = max(d.maxToken, tok)
	return nil
}

func (d *natsDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind != driver.Exclusive {
		return driver.Grant{}, fmt.Errorf("natslock: %w: %s", dlock.ErrUnsupported, kindsNote)
	}
	if d.closed() {
		return driver.Grant{}, fmt.Errorf("natslock: acquire %q: %w", r.Name, dlock.ErrClosed)
	}
	ctx, cancel := d.bind(ctx)
	defer cancel()
	h := &hold{key: key(r.Name), val: value{Owner: r.Owner, Label: r.Label, ID: newID(), TTL: r.TTL.Milliseconds()}}
	var g driver.Grant
	var err error
	if r.Wait {
		g, err = d.acquireWait(ctx, r, h) // queue.go
	} else {
		g, err = d.tryCreate(ctx, r, h)
	}
	return g, d.closedErr(err)
}

// tryCreate makes one attempt: create the lock's key if absent.
func (d *natsDriver) tryCreate(ctx context.Context, r driver.Request, h *hold) (driver.Grant, error) {
	b, _ := json.Marshal(h.val)
	rev, err := d.kv.Create(ctx, h.key, b, jetstream.KeyTTL(r.TTL))
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		g := driver.Grant{}
		if e, err := d.kv.Get(ctx, h.key); err == nil {
			var v value
			if json.Unmarshal(e.Value(), &v) == nil {
				g.Retry = max(time.Until(e.Created().Add(time.Duration(v.TTL)*time.Millisecond)), 0)
			}
		}
		return g, nil
	case err != nil:
		d.undo(ctx, h)
		return driver.Grant{}, fmt.Errorf("natslock: acquire %q: %w", r.Name, d.noteErr(err))
	}
	if err := d.fresh(ctx, rev); err != nil {
		pctx, cancel := d.detached(ctx, attemptTimeout)
		defer cancel()
		_ = d.kv.Purge(pctx, h.key, jetstream.LastRevision(rev), jetstream.PurgeTTL(markerTTL))
		return driver.Grant{}, err
	}
	return d.granted(h, rev), nil
}

func (d *natsDriver) granted(h *hold, rev uint64) driver.Grant {
	h.rev, h.val.Token = rev, rev
	return driver.Grant{Acquired: true, Token: rev, Holds: 1, Handle: h}
}

// undo removes h's key if a create that failed (a deadline, a lost reply)
// wrote it after all. A read alone could pass the create in the server, so
// it first sends a second create on the same connection: the stream
// handles the two in order, so once the second is answered the first has
// been stored or refused.
func (d *natsDriver) undo(ctx context.Context, h *hold) {
	ctx, cancel := d.detached(ctx, attemptTimeout)
	defer cancel()
	b, _ := json.Marshal(h.val)
	rev, err := d.kv.Create(ctx, h.key, b, jetstream.KeyTTL(time.Duration(h.val.TTL)*time.Millisecond))
	if errors.Is(err, jetstream.ErrKeyExists) {
		h.rev = 0
		rev, err = d.ownRevision(ctx, h)
	}
	if err == nil {
		_ = d.kv.Purge(ctx, h.key, jetstream.LastRevision(rev), jetstream.PurgeTTL(markerTTL))
	}
}

// write rewrites h's key with its TTL, expecting the revision h last wrote;
// if that fails, it reads the key and, if the hold id is still h's (a
// reply lost), writes again at the key's revision.
func (d *natsDriver) write(ctx context.Context, h *hold, ttl time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for range 2 {
		b, _ := json.Marshal(h.val)
		pa, err := d.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + d.bucket + "." + h.key, Data: b},
			jetstream.WithExpectLastSequencePerSubject(h.rev), jetstream.WithMsgTTL(ttl))
		if err == nil {
			h.rev = pa.Sequence
			return nil
		}
		if !wrongRevision(err) {
			return d.noteErr(err)
		}
		rev, err := d.ownRevision(ctx, h)
		if err != nil {
			return err
		}
		h.rev = rev
	}
	return fmt.Errorf("%w: the key changed while it was renewed", dlock.ErrLeaseLost)
}

// ownRevision returns the key's revision if it still holds h's hold id.
func (d *natsDriver) ownRevision(ctx context.Context, h *hold) (uint64, error) {
	e, err := d.kv.Get(ctx, h.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return 0, fmt.Errorf("%w: the key is gone", dlock.ErrLeaseLost)
	}
	if err != nil {
		return 0, d.noteErr(err)
	}
	var v value
	if json.Unmarshal(e.Value(), &v) != nil || v.ID != h.val.ID {
		return 0, fmt.Errorf("%w: the key belongs to another hold", dlock.ErrLeaseLost)
	}
	h.val.W = v.W // a waiter flagged itself: keep the flag
	return e.Revision(), nil
}

func wrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Renew rewrites each held key with its TTL, one compare-and-set each.
func (d *natsDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	ctx, cancel := d.bind(ctx)
	defer cancel()
	for i, hd := range batch {
		h, ok := hd.Handle.(*hold)
		if !ok {
			res[i].Err = fmt.Errorf("natslock: renew %q: %w", hd.Name, dlock.ErrLeaseLost)
			continue
		}
		if d.closed() {
			res[i].Err = fmt.Errorf("natslock: renew %q: %w", hd.Name, dlock.ErrClosed)
		} else if err := d.write(ctx, h, hd.TTL); err != nil {
			res[i].Err = fmt.Errorf("natslock: renew %q: %w", hd.Name, d.closedErr(err))
		}
	}
	return res
}

// Release purges the holder's key, expecting the revision the hold last
// wrote. Without a handle (a hold dlock found after a lost reply), it
// purges the key if it holds the owner and token.
func (d *natsDriver) Release(ctx context.Context, hd driver.Held, _ int) error {
	if d.closed() {
		return fmt.Errorf("natslock: release %q: %w", hd.Name, dlock.ErrClosed)
	}
	ctx, cancel := d.bind(ctx)
	defer cancel()
	h, ok := hd.Handle.(*hold)
	if !ok {
		e, err := d.kv.Get(ctx, key(hd.Name))
		if err != nil {
			if err = d.closedErr(err); errors.Is(err, dlock.ErrClosed) {
				return fmt.Errorf("natslock: release %q: %w", hd.Name, err)
			}
			return fmt.Errorf("natslock: release %q: %w", hd.Name, dlock.ErrLeaseLost)
		}
		var v value
		if json.Unmarshal(e.Value(), &v) != nil || v.Owner != hd.Owner || tokenOf(e, v) != hd.Token {
			return fmt.Errorf("natslock: release %q: %w", hd.Name, dlock.ErrLeaseLost)
		}
		h = &hold{key: e.Key(), rev: e.Revision(), val: v}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Retried for at most the TTL (a leader election, a reconnect): past
	// it the key has expired anyway.
	ctx, cancelTTL := context.WithTimeout(ctx, hd.TTL)
	defer cancelTTL()
	uncertain, conflicts, pause := false, 0, 50*time.Millisecond
	for {
		var err error
		if h.val.W {
			err = d.handOver(ctx, hd.Name, h)
		} else {
			err = d.kv.Purge(ctx, h.key, jetstream.LastRevision(h.rev), jetstream.PurgeTTL(markerTTL))
		}
		if err == nil {
			return nil
		}
		if err := d.closedErr(err); errors.Is(err, dlock.ErrClosed) {
			return fmt.Errorf("natslock: release %q: %w", hd.Name, err) // no store left to try again on
		}
		if !wrongRevision(err) && !errors.Is(err, jetstream.ErrKeyExists) {
			// Uncertain: it may have been applied. Try again after a pause.
			uncertain = true
			select {
			case <-ctx.Done():
				return fmt.Errorf("natslock: release %q: %w", hd.Name, d.noteErr(err))
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
			continue
		}
		rev, err := d.ownRevision(ctx, h)
		if err != nil {
			if uncertain && errors.Is(err, dlock.ErrLeaseLost) {
				return nil // gone or handed over: most likely by our own earlier attempt
			}
			return fmt.Errorf("natslock: release %q: %w", hd.Name, d.closedErr(err))
		}
		h.rev = rev
		if conflicts++; conflicts > 10 { // each waiter flags the key once
			return fmt.Errorf("natslock: release %q: the key kept changing", hd.Name)
		}
	}
}

func tokenOf(e jetstream.KeyValueEntry, v value) uint64 {
	if v.Token != 0 {
		return v.Token
	}
	return e.Revision()
}

// ForceRelease purges the lock's key, whoever holds it.
func (d *natsDriver) ForceRelease(ctx context.Context, name string) error {
	ctx, cancel := d.bind(ctx)
	defer cancel()
	e, err := d.kv.Get(ctx, key(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("natslock: force release %q: %w", name, d.closedErr(err))
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
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return info, nil
	}
	if err != nil {
		return info, fmt.Errorf("natslock: inspect %q: %w", name, d.closedErr(d.noteErr(err)))
	}
	info = describe(name, e)
	if _, n, err := d.queue(ctx, name); err == nil {
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
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
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
