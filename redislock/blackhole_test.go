package redislock_test

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// blackhole is a TCP proxy on loopback that, once cut, stops forwarding in
// both directions without closing anything: bytes sent either way are read
// and dropped, as on a network that silently loses packets, and the client
// learns nothing until its own deadlines run out.
type blackhole struct {
	ln     net.Listener
	target string
	cut    atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *blackhole) Addr() string { return b.ln.Addr().String() }

// Cut stops forwarding, for good.
func (b *blackhole) Cut() { b.cut.Store(true) }

func (b *blackhole) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		var s net.Conn
		if !b.cut.Load() {
			if s, err = net.Dial("tcp", b.target); err != nil {
				_ = c.Close()
				continue
			}
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		if s != nil {
			b.conns = append(b.conns, s)
		}
		b.mu.Unlock()
		b.wg.Add(2)
		go b.pipe(c, s)
		go b.pipe(s, c)
	}
}

// pipe copies from src to dst until either closes, dropping what it reads
// once cut. A nil end drops everything.
func (b *blackhole) pipe(src, dst net.Conn) {
	defer b.wg.Done()
	if src == nil {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && !b.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (b *blackhole) close() {
	_ = b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// TestCutOffHolderIsToldFirst: a holder whose connection to Redis goes
// silent (no reset, no FIN) must see its lease end (Done closes) before
// another client can acquire the lock. A client opened from a URL follows
// context deadlines, so a renewal sent into the silence gives up at the
// lease's deadline instead of waiting out the read timeout.
func TestCutOffHolderIsToldFirst(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	const name = "cut-off-holder"
	ttl := 2 * time.Second
	bh := newBlackhole(t, srv.Addr())
	holder, err := dlock.Open(ctx, "redis://"+bh.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	other := openURL(t, srv)

	l, err := holder.Mutex(name, dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 2) // mid-lease, after a renewal
	bh.Cut()
	cut := time.Now()

	var told time.Time
	toldCh := make(chan struct{})
	go func() {
		<-l.Done()
		told = time.Now()
		close(toldCh)
	}()
	// The other client polls; the send time of its successful attempt is
	// no later than the store's grant.
	var took time.Time
	m := other.Mutex(name, dlock.WithTTL(ttl))
	for end := cut.Add(4 * ttl); ; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the other client could not take the lock of a cut-off holder")
		}
		sent := time.Now()
		ol, err := m.TryLock(ctx)
		if errors.Is(err, dlock.ErrNotAcquired) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		took = sent
		_ = ol.Unlock(ctx)
		break
	}
	select {
	case <-toldCh:
	case <-time.After(10 * time.Second):
		t.Fatalf("the cut-off holder was never told (Err %v)", l.Err())
	}
	if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
		t.Errorf("holder's Err = %v; want ErrLeaseLost", l.Err())
	}
	margin := took.Sub(told)
	t.Logf("cut at +0; holder told at %v, other acquired at %v: margin %v",
		told.Sub(cut).Round(time.Millisecond), took.Sub(cut).Round(time.Millisecond), margin.Round(time.Millisecond))
	if margin <= 0 {
		t.Errorf("the holder was told %v after another client acquired the lock", -margin)
	}
}
