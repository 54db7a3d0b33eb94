package notify

import (
	"context"
	"testing"
)

// Changes sent before a read coalesce into one, and Close cancels the feed
// and returns only once it has returned.
func TestSendCoalescesAndCloseWaits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sent, returned := make(chan struct{}), false
	s := Go(cancel, func(s *Sub) {
		s.Send()
		s.Send() // not blocked: one change is already waiting
		close(sent)
		<-ctx.Done()
		returned = true
	})
	<-sent
	<-s.C()
	select {
	case <-s.C():
		t.Fatal("two values for two changes sent before a read; want one")
	default:
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !returned { // written before done closed: no race
		t.Fatal("Close returned before the feed did")
	}
}
