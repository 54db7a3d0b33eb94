package sqlbase

import (
	"errors"
	"net/url"
	"testing"

	"github.com/dlock/dlock/driver"
)

// max_held sizes a channel made up front: a huge or negative value was a
// crash (makechan) or out of memory; now it is refused with the reason.
func TestMaxHeldIsBounded(t *testing.T) {
	for _, v := range []string{"-1", "0", "10001", "9223372036854775807", "99999999999999999999", "x"} {
		q, _ := url.ParseQuery("max_held=" + v)
		if _, _, err := URLOptions("x", q); !errors.Is(err, driver.ErrInvalidURL) {
			t.Errorf("URLOptions(max_held=%s) = %v; want ErrInvalidURL", v, err)
		}
	}
	q, _ := url.ParseQuery("max_held=10000")
	if _, n, err := URLOptions("x", q); err != nil || n != 10000 {
		t.Errorf("URLOptions(max_held=10000) = %d, %v", n, err)
	}
	if _, _, err := CheckOptions("x", ModeRow, 1<<40); !errors.Is(err, driver.ErrInvalidConfig) {
		t.Errorf("CheckOptions(MaxHeld 2^40) = %v; want ErrInvalidConfig", err)
	}
}

// mode= or max_held= given twice had its first value used, silently
// (mode=session&mode=table locked in session mode).
func TestURLOptionsRepeatedIsRefused(t *testing.T) {
	for _, raw := range []string{"mode=session&mode=table", "max_held=1&max_held=2"} {
		q, _ := url.ParseQuery(raw)
		if _, _, err := URLOptions("x", q); !errors.Is(err, driver.ErrInvalidURL) {
			t.Errorf("URLOptions(%s) = %v; want ErrInvalidURL", raw, err)
		}
	}
}
