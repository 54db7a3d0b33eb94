package natslock_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/natslock"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

var caps = drivertest.Caps{TTL: 2 * time.Second, Slack: time.Second}

// TLS describes the TLS section (drivertest.TLSHarness): a CA and client
// certificates (verify: true); the core of the contract over tls://; no
// client certificate, a certificate for another name and a plaintext URL
// are refused with the reason.
func (h *harness) TLS(t *testing.T) drivertest.TLSCase {
	c := testserver.NewTLS(t)
	srv := testserver.NATSProcess(t, testserver.NATSConfig(`tls {
  cert_file: "`+c.CertFile+`"
  key_file: "`+c.KeyFile+`"
  ca_file: "`+c.CAFile+`"
  verify: true
  timeout: 2
}`))
	port := strings.Split(srv.Addr(), ":")[1]
	ca := "ca=" + url.QueryEscape(c.CAFile)
	cert := "&cert=" + url.QueryEscape(c.ClientCertFile) + "&key=" + url.QueryEscape(c.ClientKeyFile)
	return drivertest.TLSCase{
		URL:           "tls://" + srv.Addr() + "/tlsb?" + ca + cert,
		Caps:          caps,
		Plaintext:     "nats://" + srv.Addr() + "/tlsb",
		PlaintextSays: []string{"natslock: connect"},
		NeedTLS:       "nats://" + srv.Addr() + "?" + ca,
		NeedTLSSays:   "tls://",
		More: map[string]func(t *testing.T){
			"NoClientCertificate": func(t *testing.T) {
				drivertest.WantOpenError(t, "tls://"+srv.Addr()+"/tlsb?"+ca, "natslock: connect")
			},
			"OtherName": func(t *testing.T) {
				drivertest.WantOpenError(t, "tls://localhost:"+port+"/tlsb?"+ca+cert, "certificate")
			},
		},
	}
}

// LeastPrivilege gives the suite clients of a user with exactly the
// package doc's PermissionsInbox on its bucket, which an admin made, and
// a reply prefix of its own: the narrowest block, subscribe rights on
// that prefix only (drivertest.ACLHarness).
func (h *harness) LeastPrivilege(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
	srv := testserver.NATSProcess(t, testserver.NATSConfig(`authorization {
  users = [
    {user: admin, password: adminpw}
    {user: a, password: apw, permissions: `+natslock.PermissionsInbox("bucket-a", "_INBOX_A")+`}
  ]
}`))
	c, err := dlock.Open(ctx, "nats://admin:adminpw@"+srv.Addr()+"/bucket-a")
	if err != nil {
		return nil, err
	}
	_ = c.Close()
	return &harness{url: "nats://a:apw@" + srv.Addr(), bucket: "bucket-a", inbox: "_INBOX_A"}, nil
}

// Two users with Permissions of their own bucket, and an admin who made
// the buckets: neither can open, read, take or purge the other's locks
// (the suite's LeastPrivilege section runs the contract under the grant).
func TestTenantIsolation(t *testing.T) {
	ctx := t.Context()
	srv := testserver.NATSProcess(t, testserver.NATSConfig(`authorization {
  users = [
    {user: admin, password: adminpw}
    {user: a, password: apw, permissions: `+natslock.Permissions("bucket-a")+`}
    {user: b, password: bpw, permissions: `+natslock.Permissions("bucket-b")+`}
  ]
}`))
	for _, b := range []string{"bucket-a", "bucket-b"} {
		c, err := dlock.Open(ctx, "nats://admin:adminpw@"+srv.Addr()+"/"+b)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	aURL := "nats://a:apw@" + srv.Addr() + "/bucket-a?create=false"

	a := drivertest.MustOpen(t, aURL)
	l, err := a.Mutex("tenant").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(ctx) }()

	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c, err := dlock.Open(octx, "nats://b:bpw@"+srv.Addr()+"/bucket-a?create=false"); err == nil {
		_ = c.Close()
		t.Fatal("b opened a's bucket")
	}
	// b's own client, with its documented rights, straight at a's subjects.
	nc, err := nats.Connect("nats://"+srv.Addr(), nats.UserInfo("b", "bpw"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kctx, kcancel := context.WithTimeout(ctx, 3*time.Second)
	defer kcancel()
	if _, err := js.KeyValue(kctx, "bucket-a"); err == nil {
		t.Fatal("b reached a's bucket")
	}
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	var lease *natslock.Lease
	if !l.As(&lease) {
		t.Fatal("no natslock.Lease")
	}
	if _, err := js.Publish(pctx, "$KV.bucket-a."+lease.Key, nil, jetstream.WithMsgTTL(time.Second)); err == nil {
		t.Fatal("b wrote a's lock key")
	}
	if _, err := js.Publish(ctx, "$KV.bucket-b."+lease.Key, nil); err != nil {
		t.Fatalf("b cannot write its own bucket: %v", err)
	}
	select {
	case <-l.Done():
		t.Fatalf("a's lease ended: %v", l.Err())
	default:
	}
	if info, err := a.Inspect(ctx, "tenant"); err != nil || !info.Held || info.Token != l.Token() {
		t.Fatalf("a's lock after b's attempts: %+v, %v", info, err)
	}
	// A user that may not create streams cannot make a missing bucket.
	_, err = dlock.Open(octx, "nats://a:apw@"+srv.Addr()+"/bucket-new")
	if err == nil || errors.Is(err, dlock.ErrInvalidURL) {
		t.Fatalf("a made a bucket: %v", err)
	}
}

// An nkey user (the seed in a file, nkey=) and a token (token_file=) both
// open and lock; a wrong seed is refused.
func TestNkeyAndToken(t *testing.T) {
	ctx := t.Context()
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.NATSProcess(t, testserver.NATSConfig(`authorization { users = [ {nkey: `+pub+`} ] }`))
	c, err := dlock.Open(ctx, "nats://"+srv.Addr()+"/nk?nkey="+url.QueryEscape(seedFile))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := c.Mutex("n").Lock(ctx); err != nil {
		t.Fatal(err)
	} else {
		_ = l.Unlock(ctx)
	}
	_ = c.Close()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	otherFile := filepath.Join(dir, "other.nk")
	_ = os.WriteFile(otherFile, otherSeed, 0o600)
	drivertest.WantOpenError(t, "nats://"+srv.Addr()+"/nk?nkey="+url.QueryEscape(otherFile), "natslock: connect")

	tsrv := testserver.NATSProcess(t, `authorization { token: "t0ken-s3cret" }`)
	tokFile := filepath.Join(dir, "token")
	_ = os.WriteFile(tokFile, []byte("t0ken-s3cret\n"), 0o600)
	drivertest.CheckURL(t, "nats://"+tsrv.Addr()+"/tk?token_file="+url.QueryEscape(tokFile))
}
