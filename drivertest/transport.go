package drivertest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// TLSHarness is a Harness whose store can also be reached over TLS: Run
// then runs the TLS section against the TLS-only server that TLS starts.
type TLSHarness interface {
	Harness
	// TLS starts a TLS-only server of the store, with its certificates from
	// the test CA, and says how to reach it, right and wrong.
	TLS(t *testing.T) TLSCase
}

// TLSCase is how a store is reached over TLS, and the ways of reaching it
// that must fail. Every URL but URL may be empty where the store has no such
// case; the section runs a subtest per case.
type TLSCase struct {
	// URL verifies the server against the test CA: the core of the suite
	// runs over it, with Caps.
	URL  string
	Caps Caps
	// Working are other URLs that must work (a client certificate,
	// another mode), each checked by a lock round trip and contention.
	Working map[string]string
	// OtherName names the server by a name its certificate has not
	// (localhost): Open must fail saying "certificate" and "localhost".
	// Insecure are the URLs that accept it (insecure_skip_verify=true, or
	// the store's own spelling), which must work.
	OtherName string
	Insecure  []string
	// Plaintext reaches the TLS-only server without TLS: Open must fail, in
	// bounded time, saying each of PlaintextSays.
	Plaintext     string
	PlaintextSays []string
	// NeedTLS gives TLS parameters without turning TLS on: Open must fail
	// with ErrInvalidURL saying NeedTLSSays (how to turn it on).
	NeedTLS     string
	NeedTLSSays string
	// BadKey names a client key at a path holding "s3cret" (MissingKey):
	// Open must fail with ErrInvalidURL saying each of BadKeySays and not
	// the path.
	BadKey     string
	BadKeySays []string
	// More are the store's own checks against the same server.
	More map[string]func(t *testing.T)
}

// MissingKey is a client key's path for TLSCase.BadKey: no file is there,
// and it holds "s3cret", which Open's error must not show.
const MissingKey = "/nonexistent/s3cret/k.pem"

// runTLS runs the TLS section for tc.
func runTLS(t *testing.T, tc TLSCase) {
	t.Run("Core", func(t *testing.T) { runCore(t, URLOpener(tc.URL), tc.Caps) })
	for _, name := range slices.Sorted(maps.Keys(tc.Working)) {
		t.Run(name, func(t *testing.T) { CheckURL(t, tc.Working[name]) })
	}
	if tc.OtherName != "" {
		t.Run("OtherName", func(t *testing.T) {
			err := WantOpenError(t, tc.OtherName, "certificate", "localhost")
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("refused certificate reported as a timeout: %v", err)
			}
			for _, u := range tc.Insecure {
				CheckURL(t, u)
			}
		})
	}
	if tc.Plaintext != "" {
		t.Run("Plaintext", func(t *testing.T) { WantOpenError(t, tc.Plaintext, tc.PlaintextSays...) })
	}
	if tc.NeedTLS != "" {
		t.Run("TLSParamsNeedTLS", func(t *testing.T) { WantInvalidURL(t, tc.NeedTLS, "", tc.NeedTLSSays) })
	}
	if tc.BadKey != "" {
		t.Run("KeyPathHidden", func(t *testing.T) { WantInvalidURL(t, tc.BadKey, "s3cret", tc.BadKeySays...) })
	}
	for _, name := range slices.Sorted(maps.Keys(tc.More)) {
		t.Run(name, tc.More[name])
	}
}

// runCore runs the part of the suite that needs no fault injection —
// exclusion under contention, fencing tokens, TryLock, stale unlocks,
// renewal, re-entry, Close and Inspect — against clients from open, each a
// new client of the same store (as another process would open it). It
// proves a way of connecting (TLS) keeps the core of the contract, in a few
// seconds, where the whole suite already runs on a plain connection.
func runCore(t *testing.T, open func(ctx context.Context) (*dlock.Client, error), caps Caps) {
	s := &suite{h: openHarness{open: open, caps: caps}, caps: caps.withDefaults()}
	s.runAll(t, []test{
		{"MutualExclusion", s.testMutualExclusion},
		{"TokensIncrease", s.testTokensIncrease},
		{"TryLockHeld", s.testTryLockHeld},
		{"StaleUnlock", s.testStaleUnlock},
		{"RenewalKeepsLease", s.testRenewal},
		{"Reentrancy", s.testReentrancy},
		{"CloseReleases", s.testCloseReleases},
		{"Inspect", s.testInspect},
	})
}

// openHarness is a Harness over an open function: it cannot cut a client.
type openHarness struct {
	open func(ctx context.Context) (*dlock.Client, error)
	caps Caps
}

func (h openHarness) NewClient(ctx context.Context) (*dlock.Client, error) { return h.open(ctx) }

func (h openHarness) Cut(context.Context, *dlock.Client) error {
	return errors.New("drivertest: the TLS core cannot cut a client's connections")
}

func (h openHarness) Caps() Caps { return h.caps }

// openURL opens u, bounded by 20s, and closes the client at cleanup.
func openURL(t *testing.T, u string) (*dlock.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := dlock.Open(ctx, u)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// CheckURL opens two clients of the URL u (its backend's package must be
// imported) and checks a lock round trip and contention between them: the
// quick proof that a way of connecting works.
func CheckURL(t *testing.T, u string) {
	t.Helper()
	a, err := openURL(t, u)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	b, err := openURL(t, u)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	name := lockName(t)
	l, err := a.Mutex(name).Lock(t.Context())
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if _, err := b.Mutex(name).TryLock(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock = %v; want ErrNotAcquired", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	l2, err := b.Mutex(name).TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if err := l2.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// WantOpenError wants dlock.Open(u) to fail within 30s (not to hang) with
// an error whose text contains each of want, and returns it.
func WantOpenError(t *testing.T, u string, want ...string) error {
	t.Helper()
	start := time.Now()
	_, err := openURL(t, u)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("Open(%s) succeeded", u)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open(%s) = %v; want it to say %q", u, err, w)
		}
	}
	if took > 30*time.Second {
		t.Errorf("Open(%s) took %v to fail", u, took)
	}
	t.Logf("%v (after %v)", err, took.Round(time.Millisecond))
	return err
}
