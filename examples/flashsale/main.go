// Command flashsale is the flash-sale oversell experiment in one process:
// instances of a shop sell a stock of 100 to 30 concurrent buyers, reading
// the stock and writing stock-1 as two separate operations on a shared store.
// With only a local mutex per instance the shop oversells; with a dlock Mutex
// every sale is counted once.
//
//	go run ./examples/flashsale                       # mem:// backend
//	go run ./examples/flashsale -backend redis://127.0.0.1:6379
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock"
	_ "github.com/dlock/dlock/memlock"
)

// shared is the store both instances read and write: a value with a small
// delay on each access, as a network store has.
type shared struct {
	mu    sync.Mutex
	stock int
}

func (s *shared) get() int {
	time.Sleep(100 * time.Microsecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stock
}
func (s *shared) set(v int) {
	time.Sleep(100 * time.Microsecond)
	s.mu.Lock()
	s.stock = v
	s.mu.Unlock()
}

func main() {
	backend := flag.String("backend", "mem://flashsale", "dlock backend URL")
	instances := flag.Int("instances", 2, "shop instances (each with its own client)")
	buyers := flag.Int("buyers", 30, "concurrent buyers")
	requests := flag.Int("requests", 300, "purchase requests in total")
	flag.Parse()
	ctx := context.Background()
	failed := false
	for _, mode := range []string{"local", "dlock"} {
		store := &shared{stock: 100}
		clients := make([]*dlock.Client, *instances)
		locals := make([]sync.Mutex, *instances)
		for i := range clients {
			c, err := dlock.Open(ctx, *backend)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			defer c.Close()
			clients[i] = c
		}
		var sold, next atomic.Int64
		var wg sync.WaitGroup
		for b := range *buyers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(*requests) {
					i := b % *instances // round-robin across instances
					deduct := func() {
						if v := store.get(); v > 0 {
							store.set(v - 1)
							sold.Add(1)
						}
					}
					if mode == "local" {
						locals[i].Lock()
						deduct()
						locals[i].Unlock()
						continue
					}
					err := dlock.Do(ctx, clients[i].Mutex("stock/sku-42"), func(context.Context, *dlock.Lease) error {
						deduct()
						return nil
					})
					if err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(1)
					}
				}
			}()
		}
		wg.Wait()
		oversold := sold.Load() - 100 + int64(store.stock)
		fmt.Printf("%-6s sold %3d, final stock %3d, oversold %3d\n", mode, sold.Load(), store.stock, max(oversold, 0))
		if mode == "dlock" && oversold != 0 {
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}
