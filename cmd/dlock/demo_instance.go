package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

// Answers of POST /deduct_stock.
const (
	resSold    = "sold"
	resSoldOut = "sold_out"
	resBusy    = "busy"  // trylock found the lock held: "busy, try later"
	resStale   = "stale" // fenced: the store refused a stale holder's write
)

// demoInstanceCmd is one app instance of the demo: an HTTP server that sells
// from the shared stock. dlock demo starts several, each its own process,
// with the lock backend's URL in DLOCK_URL and the stock store's in
// DLOCK_DEMO_STORE.
func demoInstanceCmd() *cobra.Command {
	var segments int
	cmd := &cobra.Command{
		Use:    "__demo-instance",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			c, err := openBackend(ctx, os.Getenv("DLOCK_URL"))
			if err != nil {
				return err
			}
			defer closeBackend(c)
			st, err := openStore(ctx, os.Getenv("DLOCK_DEMO_STORE"))
			if err != nil {
				return fail(exitUsage, "%v", err)
			}
			defer st.close()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return fail(exitFailed, "%v", err)
			}
			inst := &instance{c: c, st: st, segments: segments}
			srv := &http.Server{Handler: inst, ReadHeaderTimeout: 10 * time.Second}
			fmt.Printf("listening %s\n", ln.Addr()) // the parent reads this line
			go func() { <-ctx.Done(); _ = srv.Close() }()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fail(exitFailed, "%v", err)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&segments, "segments", 4, "stock segments")
	return cmd
}

type instance struct {
	c        *dlock.Client
	st       stockStore
	segments int
	local    sync.Mutex // like Java's synchronized: right in one process only
}

func (in *instance) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/deduct_stock" {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	res, err := in.deduct(r.Context(), q.Get("run"), q.Get("mode"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"result": res})
}

// lockTTL is the demo locks' TTL: a whole number of seconds, which every
// backend keeps.
const lockTTL = 10 * time.Second

func (in *instance) deduct(ctx context.Context, run, mode string) (string, error) {
	keys := stockKeys(run, mode, in.segments)
	key := keys[0]
	switch mode {
	case "local":
		in.local.Lock()
		defer in.local.Unlock()
		return in.sell(ctx, key)
	case "trylock":
		l, err := in.c.Mutex(key+"/lock", dlock.WithTTL(lockTTL)).TryLock(ctx)
		if errors.Is(err, dlock.ErrNotAcquired) {
			return resBusy, nil
		}
		if err != nil {
			return "", err
		}
		defer l.Unlock(context.WithoutCancel(ctx))
		return in.sell(ctx, key)
	case "lock":
		var res string
		err := dlock.Do(ctx, in.c.Mutex(key+"/lock", dlock.WithTTL(lockTTL)), func(ctx context.Context, _ *dlock.Lease) error {
			var err error
			res, err = in.sell(ctx, key)
			return err
		})
		return res, err
	case "segmented": // start at a random segment, move on when one is empty
		first := rand.IntN(len(keys))
		for i := range keys {
			k := keys[(first+i)%len(keys)]
			var res string
			err := dlock.Do(ctx, in.c.Mutex(k+"/lock", dlock.WithTTL(lockTTL)), func(ctx context.Context, _ *dlock.Lease) error {
				var err error
				res, err = in.sell(ctx, k)
				return err
			})
			if err != nil || res == resSold {
				return res, err
			}
		}
		return resSoldOut, nil
	case "multi":
		return in.deductMulti(ctx, keys)
	case "cas": // no lock: write only if nobody wrote since our read
		for {
			v, ver, err := in.st.get(ctx, key)
			if err != nil {
				return "", err
			}
			if v <= 0 {
				return resSoldOut, nil
			}
			ok, err := in.st.cas(ctx, key, ver, v-1)
			if err != nil || ok {
				return resSold, err
			}
		}
	case "fenced":
		var res string
		err := dlock.Do(ctx, in.c.Mutex(key+"/lock", dlock.WithTTL(lockTTL)), func(ctx context.Context, l *dlock.Lease) error {
			v, _, err := in.st.get(ctx, key)
			if err != nil {
				return err
			}
			if v <= 0 {
				res = resSoldOut
				return nil
			}
			ok, err := in.st.fencedSet(ctx, key, v-1, l.Token())
			res = map[bool]string{true: resSold, false: resStale}[ok]
			return err
		})
		return res, err
	}
	return "", fmt.Errorf("unknown mode %q", mode)
}

// sell is the classic flash-sale deduct: read the stock, check it, write stock-1.
func (in *instance) sell(ctx context.Context, key string) (string, error) {
	v, _, err := in.st.get(ctx, key)
	if err != nil {
		return "", err
	}
	if v <= 0 {
		return resSoldOut, nil
	}
	if err := in.st.set(ctx, key, v-1); err != nil {
		return "", err
	}
	return resSold, nil
}
