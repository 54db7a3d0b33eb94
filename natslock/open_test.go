package natslock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/natslock"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// Open refuses a server without JetStream, with the reason.
func TestOpenRefusesNoJetStream(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("not ready")
	}
	_, err = dlock.Open(t.Context(), s.ClientURL()+"/locks")
	if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "JetStream") {
		t.Fatalf("Open without JetStream: %v, want ErrInvalidConfig naming JetStream", err)
	}
}

// Open refuses a bucket made without limit markers (no per-key TTL), and a
// missing bucket with create=false; Migrate then makes it.
func TestOpenChecksBucket(t *testing.T) {
	ctx := t.Context()
	srv := testserver.NATSProcess(t)
	nc, err := connect("nats://" + srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "plain"}); err != nil {
		t.Fatal(err)
	}
	_, err = dlock.Open(ctx, "nats://"+srv.Addr()+"/plain")
	if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "LimitMarkerTTL") {
		t.Fatalf("Open on a bucket without markers: %v, want ErrInvalidConfig", err)
	}
	_, err = dlock.Open(ctx, "nats://"+srv.Addr()+"/missing?create=false")
	if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "migrate") {
		t.Fatalf("Open on a missing bucket with create=false: %v", err)
	}
	if _, err := js.KeyValue(ctx, "missing"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("create=false made the bucket: %v", err)
	}
	drivertest.MustOpen(t, "nats://"+srv.Addr()+"/made?replicas=1&storage=memory")
	kv, err := js.KeyValue(ctx, "made")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := kv.Status(ctx)
	if st.LimitMarkerTTL() <= 0 || st.History() != 1 || st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Storage != jetstream.MemoryStorage {
		t.Fatalf("made bucket: markers %v, history %d", st.LimitMarkerTTL(), st.History())
	}
}

func TestURLErrors(t *testing.T) {
	for _, u := range []string{
		"nats://127.0.0.1:1/b?replicas=7",
		"nats://127.0.0.1:1/b?storage=disk",
		"nats://127.0.0.1:1/b?bogus=1",
		"nats://127.0.0.1:1/b?ca=ca.pem",
		"nats://127.0.0.1:1/b?create=maybe",
		"nats://127.0.0.1:1/b?creds=/nonexistent/x.creds",
		// A parameter given twice had its first value used, silently
		// (storage=memory&storage=file kept memory, which does not fence
		// across restarts).
		"nats://127.0.0.1:1/b?storage=memory&storage=file",
		"nats://127.0.0.1:1/b?replicas=1&replicas=3",
		// Bucket names JetStream refuses failed after connecting, with an
		// untyped error quoting the name whole.
		"nats://127.0.0.1:1/a.b", "nats://127.0.0.1:1/a/b", "nats://127.0.0.1:1/a%20b", "nats://127.0.0.1:1/bad*name",
		"nats://127.0.0.1:1/" + strings.Repeat("b", 253),
	} {
		_, err := dlock.Open(t.Context(), u)
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("%s: %v, want ErrInvalidURL", u, err)
		}
	}
	// A refused password never shows.
	srv := testserver.NATSProcess(t, `authorization { user: a, password: right }`)
	_, err := dlock.Open(t.Context(), "nats://a:s3cr3t-pw@"+srv.Addr()+"/b")
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Fatalf("wrong password: %v", err)
	}
}

// A bucket deleted and created again restarts its sequence: a client that
// was using the old one refuses to grant from the new one.
func TestRecreatedBucketRefused(t *testing.T) {
	ctx := t.Context()
	srv := testserver.NATSProcess(t)
	url := "nats://" + srv.Addr() + "/again"
	c := drivertest.MustOpen(t, url)
	for range 3 {
		l, err := c.Mutex("r").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock(ctx)
	}
	nc, err := connect("nats://" + srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := js.DeleteKeyValue(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	c2, err := natslock.Open(ctx, nc, natslock.Options{Bucket: "again"}) // creates it anew
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = c.Mutex("r").Lock(ctx)
	if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "created again") {
		t.Fatalf("Lock on a re-created bucket: %v, want ErrInvalidConfig", err)
	}
}
