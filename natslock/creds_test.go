package natslock_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// operator is an in-process nats-server in operator mode (JWT
// authentication, accounts from a memory resolver) with JetStream, and one
// account with JetStream limits.
type operator struct {
	url     string
	account nkeys.KeyPair // signs the account's users
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func newOperator(t *testing.T) *operator {
	t.Helper()
	opKP := must(nkeys.CreateOperator())
	opClaims := jwt.NewOperatorClaims(must(opKP.PublicKey()))
	opJWT := must(opClaims.Encode(opKP))
	op := must(jwt.DecodeOperatorClaims(opJWT))

	resolver := &server.MemAccResolver{}
	account := func(limits bool) (nkeys.KeyPair, string) {
		kp := must(nkeys.CreateAccount())
		pub := must(kp.PublicKey())
		ac := jwt.NewAccountClaims(pub)
		if limits {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		if err := resolver.Store(pub, must(ac.Encode(opKP))); err != nil {
			t.Fatal(err)
		}
		return kp, pub
	}
	_, sysPub := account(false)
	appKP, _ := account(true)

	s := testserver.NATSServer(t, &server.Options{ServerName: "dlockop",
		TrustedOperators: []*jwt.OperatorClaims{op}, AccountResolver: resolver, SystemAccount: sysPub})
	return &operator{url: s.ClientURL(), account: appKP}
}

// creds writes a .creds file (the user JWT and its nkey seed, as nsc
// makes it) for a new user signed by signer, and returns its path and
// contents' secrets.
func creds(t *testing.T, signer nkeys.KeyPair) (path, userJWT, seed string) {
	t.Helper()
	ukp := must(nkeys.CreateUser())
	uc := jwt.NewUserClaims(must(ukp.PublicKey()))
	userJWT = must(uc.Encode(signer))
	seedB := must(ukp.Seed())
	b := must(jwt.FormatUserConfig(userJWT, seedB))
	path = filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, userJWT, string(seedB)
}

// A credentials file (creds=) of a user of the operator's account logs in
// and locks; one of a user signed by an account the server does not know
// is refused, and the error shows neither its JWT nor its seed.
func TestCredsFile(t *testing.T) {
	ctx := t.Context()
	op := newOperator(t)
	host := strings.TrimPrefix(op.url, "nats://")

	good, _, _ := creds(t, op.account)
	c, err := dlock.Open(ctx, "nats://"+host+"/credsb?creds="+url.QueryEscape(good))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex("creds").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()

	stranger := must(nkeys.CreateAccount())
	bad, badJWT, badSeed := creds(t, stranger)
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err = dlock.Open(octx, "nats://"+host+"/credsb?creds="+url.QueryEscape(bad))
	if err == nil {
		_ = c.Close()
		t.Fatal("a user of an unknown account logged in")
	}
	t.Logf("stranger's creds: %v", err)
	if !strings.Contains(err.Error(), "natslock: connect") || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("Open with a stranger's creds: %v; want natslock: connect and the server's authorization refusal", err)
	}
	for _, secret := range []string{badJWT, badSeed, badSeed[:20], badJWT[len(badJWT)-20:]} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the error shows the creds file's secrets: %v", err)
		}
	}

	// A file that is not a credentials file: refused, without its contents.
	junk := filepath.Join(t.TempDir(), "junk.creds")
	if err := os.WriteFile(junk, []byte("not-a-jwt "+badSeed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := dlock.Open(octx, "nats://"+host+"/credsb?creds="+url.QueryEscape(junk)); err == nil {
		_ = c.Close()
		t.Fatal("a junk creds file logged in")
	} else if t.Logf("junk creds: %v", err); strings.Contains(err.Error(), badSeed) || strings.Contains(err.Error(), "not-a-jwt") {
		t.Fatalf("the error shows the file's contents: %v", err)
	}
}
