package refused

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestDials(t *testing.T) {
	refusal := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	var got []error
	d := New([]string{"a:1", "b:2", "a:1"}, func(err error) { got = append(got, err) })
	d.Note("c:3", refusal)                   // not one of ours
	d.Note("a:1", errors.New("i/o timeout")) // not a refusal
	d.Note("a:1", refusal)
	d.Note("a:1", refusal) // the same address again
	if len(got) != 0 {
		t.Fatalf("told after one of two addresses refused: %v", got)
	}
	d.Note("b:2", refusal)
	if len(got) != 1 || !errors.Is(got[0], syscall.ECONNREFUSED) {
		t.Fatalf("told %v; want one refusal", got)
	}
	d.Note("b:2", refusal)
	if len(got) != 1 {
		t.Fatalf("told %d times", len(got))
	}

	got = nil
	d = New([]string{"a:1", "b:2"}, func(err error) { got = append(got, err) })
	d.Note("b:2", nil) // accepted: the other's refusal is no reason
	d.Note("a:1", refusal)
	d.Note("b:2", refusal)
	d = New([]string{"a:1"}, func(err error) { got = append(got, err) })
	d.Stop()
	d.Note("a:1", refusal)
	var none *Dials
	none.Note("a:1", refusal)
	none.Stop()
	if len(got) != 0 {
		t.Fatalf("told %v after an accept or a Stop", got)
	}
}
