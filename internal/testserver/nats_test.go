package testserver

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Both modes give a server with JetStream on; the process survives a kill
// and restart on its store.
func TestNATS(t *testing.T) {
	ctx := t.Context()
	check := func(url string) {
		t.Helper()
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		if _, err := js.AccountInfo(ctx); err != nil {
			t.Fatalf("jetstream at %s: %v", url, err)
		}
	}
	check(NATSInProcess(t))
	s := NATSProcess(t)
	check("nats://" + s.Addr())
	s.Kill()
	if err := natsReady(context.Background(), s.Addr()); err == nil {
		t.Fatal("killed server still answers")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	check("nats://" + s.Addr())
}
