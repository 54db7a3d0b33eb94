package pglock

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// hub keeps one connection per client listening on its tables' release
// channel and passes each release to the waiters of its name. If the
// connection fails it reconnects; waiters meanwhile fall back to their
// timers.
//
// The channel is "dlock_release_<OID of dlock_locks>": one per schema (per
// tenant), so tenants that share a database do not wake each other's
// waiters on every release. PostgreSQL checks no privilege on LISTEN or
// NOTIFY, and table OIDs are public, so another tenant can still listen or
// notify there: the payload is md5(name), not the name, so a listener
// learns when some lock was released, and can confirm a name it guessed,
// but reads none; and a notification only wakes waiters, who then try
// again and find the lock as it is, so one sent by anybody is harmless
// (TestSpuriousNotify).
type hub struct {
	pool   *pgxpool.Pool
	mu     sync.Mutex
	subs   map[string]map[*sub]struct{} // by payload(name)
	ready  chan struct{}                // closed once LISTEN is in place
	cancel context.CancelFunc
	done   chan struct{}
}

type sub struct {
	h    *hub
	name string // payload(the lock's name)
	c    chan struct{}
	once sync.Once
}

func newHub(pool *pgxpool.Pool) *hub {
	return &hub{pool: pool, subs: map[string]map[*sub]struct{}{}}
}

func (h *hub) subscribe(ctx context.Context, name string) (driver.Subscription, error) {
	h.mu.Lock()
	if h.done == nil { // start listening on first use
		lctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done, h.ready = cancel, make(chan struct{}), make(chan struct{})
		go h.listen(lctx)
	}
	key := payload(name)
	s := &sub{h: h, name: key, c: make(chan struct{}, 1)}
	if h.subs[key] == nil {
		h.subs[key] = map[*sub]struct{}{}
	}
	h.subs[key][s] = struct{}{}
	ready := h.ready
	h.mu.Unlock()
	select {
	case <-ready:
		return s, nil
	case <-ctx.Done():
		_ = s.Close()
		return nil, ctx.Err()
	}
}

func (h *hub) listen(ctx context.Context) {
	defer close(h.done)
	var once sync.Once
	for ctx.Err() == nil {
		conn, err := h.pool.Acquire(ctx)
		if err == nil {
			var ch string
			err = conn.QueryRow(ctx, releaseChannelSQL).Scan(&ch)
			if err == nil {
				_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize())
			}
			if err == nil {
				once.Do(func() { close(h.ready) })
				h.wakeAll() // releases may have been missed while reconnecting
				for err == nil {
					var n *pgconn.Notification
					n, err = conn.Conn().WaitForNotification(ctx)
					if err == nil {
						h.wake(n.Payload)
					}
				}
			}
			_ = conn.Conn().Close(context.Background()) // never pool a listening connection
			conn.Release()
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// releaseChannelSQL names the channel releases of the tables in the
// search_path are announced on; the statements that release notify
// 'dlock_release_' || 'dlock_locks'::regclass::oid::text, md5(name).
const releaseChannelSQL = `SELECT 'dlock_release_' || 'dlock_locks'::regclass::oid::text`

// payload is what a release of name carries: its MD5, as md5(name) gives.
func payload(name string) string {
	sum := md5.Sum([]byte(name))
	return hex.EncodeToString(sum[:])
}

// wake wakes the waiters of the name whose payload p is.
func (h *hub) wake(p string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[p] {
		select {
		case s.c <- struct{}{}:
		default:
		}
	}
}

func (h *hub) wakeAll() {
	h.mu.Lock()
	names := make([]string, 0, len(h.subs))
	for n := range h.subs {
		names = append(names, n)
	}
	h.mu.Unlock()
	for _, n := range names {
		h.wake(n)
	}
}

func (h *hub) close() {
	h.mu.Lock()
	cancel, done := h.cancel, h.done
	h.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (s *sub) C() <-chan struct{} { return s.c }

func (s *sub) Close() error {
	s.once.Do(func() {
		s.h.mu.Lock()
		defer s.h.mu.Unlock()
		delete(s.h.subs[s.name], s)
		if len(s.h.subs[s.name]) == 0 {
			delete(s.h.subs, s.name)
		}
	})
	return nil
}
