package zklock_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// replyDropper is a ZooKeeper proxy that, once armed, lets the next create
// of a lock node reach the server and then cuts the connection instead of
// passing the reply back: the create happened, but the client cannot know.
type replyDropper struct {
	ln      net.Listener
	target  string
	marker  []byte // in the created node's name: "-lock-" unless newReplyDropperFor
	armed   atomic.Bool
	dropped atomic.Int32
	lastOp  atomic.Uint32 // the opcode of the last request whose reply was dropped
	wg      sync.WaitGroup
}

func newReplyDropper(t *testing.T, target string) *replyDropper {
	return newReplyDropperFor(t, target, "-lock-")
}

// newReplyDropperFor drops the reply to the create of a node whose name
// contains marker.
func newReplyDropperFor(t *testing.T, target, marker string) *replyDropper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyDropper{ln: ln, target: target, marker: []byte(marker)}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *replyDropper) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		var dropXid atomic.Int64
		dropXid.Store(-2) // none
		cut := func() { client.Close(); server.Close() }
		p.wg.Add(2)
		go func() { // client → server
			defer p.wg.Done()
			defer cut()
			for n := 0; ; n++ {
				frame, err := readFrame(client)
				if err != nil {
					return
				}
				// Frames after the handshake start with xid and opcode;
				// opcode 1 is create, 14 multi (a create with the parent write).
				if n > 0 && len(frame) >= 12 && opcodes[binary.BigEndian.Uint32(frame[8:12])] &&
					bytes.Contains(frame, p.marker) && p.armed.CompareAndSwap(true, false) {
					dropXid.Store(int64(int32(binary.BigEndian.Uint32(frame[4:8]))))
					p.lastOp.Store(binary.BigEndian.Uint32(frame[8:12]))
				}
				if _, err := server.Write(frame); err != nil {
					return
				}
			}
		}()
		go func() { // server → client
			defer p.wg.Done()
			defer cut()
			for n := 0; ; n++ {
				frame, err := readFrame(server)
				if err != nil {
					return
				}
				if n > 0 && len(frame) >= 8 && int64(int32(binary.BigEndian.Uint32(frame[4:8]))) == dropXid.Load() {
					p.dropped.Add(1)
					return // the reply to the create: drop it and the connection
				}
				if _, err := client.Write(frame); err != nil {
					return
				}
			}
		}()
	}
}

// opcodes are the requests that can create a lock node.
var opcodes = map[uint32]bool{1: true, 14: true}

// readFrame reads one length-prefixed ZooKeeper packet, prefix included.
func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 1<<20 {
		return nil, io.ErrUnexpectedEOF
	}
	frame := make([]byte, 4+size)
	copy(frame, n[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// A create whose reply is lost with the connection leaves exactly one node:
// the client finds it by the GUID in its name instead of creating another,
// which would hold the lock for the rest of the session.
func TestLostCreateReply(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	proxy := newReplyDropper(t, srv.Addr())
	c := openZK(t, []string{proxy.ln.Addr().String()}, sessionTimeout)
	direct := rawConn(t, srv.Addr())
	ctx := t.Context()

	// The first Lock of the path creates the node alone (it does not know
	// yet that the parent is empty); later ones create it in a multi.
	for i, try := range []bool{false, false, true} {
		proxy.armed.Store(true)
		before := proxy.dropped.Load()
		m := c.Mutex("lostreply/x")
		lock := m.Lock
		if try {
			lock = m.TryLock
		}
		l, err := lock(ctx)
		if err != nil {
			t.Fatalf("lock through a lost reply (try=%v): %v", try, err)
		}
		if proxy.dropped.Load() != before+1 {
			t.Fatalf("the proxy dropped %d create replies; want 1", proxy.dropped.Load()-before)
		}
		if want := map[bool]uint32{false: 1, true: 14}[i > 0]; proxy.lastOp.Load() != want {
			t.Errorf("round %d: the dropped reply was to opcode %d; want %d", i, proxy.lastOp.Load(), want)
		}
		var zl *zklock.Lease
		if !l.As(&zl) {
			t.Fatal("Lease.As(*zklock.Lease) failed")
		}
		children, _, err := direct.Children("/lostreply/x")
		if err != nil {
			t.Fatal(err)
		}
		if len(children) != 1 || "/lostreply/x/"+children[0] != zl.Path {
			t.Fatalf("children %v; want only the holder %s", children, zl.Path)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			children, _, err = direct.Children("/lostreply/x")
			if err == zk.ErrNoNode || err == nil && len(children) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after Unlock: children %v, %v", children, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// The same for a read-write lock's write node and a semaphore's lease node:
// the search by GUID must see those nodes too (it saw lock- nodes only, so
// the client created a second node behind its own orphan and waited for it
// for good, and a TryLock cut short left its node holding the lock for the
// rest of the session).
func TestLostCreateReplyKinds(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	direct := rawConn(t, srv.Addr())
	for _, kind := range []string{"__WRIT__", "lease-"} {
		t.Run(kind, func(t *testing.T) {
			proxy := newReplyDropperFor(t, srv.Addr(), kind)
			c := openZK(t, []string{proxy.ln.Addr().String()}, sessionTimeout)
			name := "lostreply/" + strings.Trim(kind, "_-")
			path := "/" + name // its node, the client having no chroot
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			lock := func() (*dlock.Lease, error) {
				if kind == "lease-" {
					return c.Semaphore(name, 1).Acquire(ctx)
				}
				return c.RWMutex(name).Lock(ctx)
			}
			l, err := lock() // the lock's node exists from now on: the armed create is the one that makes ours
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			proxy.armed.Store(true)
			if l, err = lock(); err != nil {
				t.Fatalf("lock through a lost reply: %v", err)
			}
			if proxy.dropped.Load() != 1 {
				t.Fatalf("the proxy dropped %d create replies; want 1", proxy.dropped.Load())
			}
			nodes := path
			if kind == "lease-" {
				nodes += "/leases"
			}
			children, _, err := direct.Children(nodes)
			if err != nil {
				t.Fatal(err)
			}
			var ours []string
			for _, n := range children {
				if strings.Contains(n, kind) {
					ours = append(ours, n)
				}
			}
			if len(ours) != 1 {
				t.Fatalf("%s nodes %v; want only the holder's", kind, ours)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
