package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlock/dlock/driver"
)

// password_file=/dev/zero read without end and exhausted memory: the read
// is bounded, and the error says why.
func TestPasswordFileIsBounded(t *testing.T) {
	_, err := driver.ParseURL("redis://app@127.0.0.1:1?password_file=/dev/zero")
	if !errors.Is(err, driver.ErrInvalidURL) || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("ParseURL(password_file=/dev/zero) = %v; want ErrInvalidURL saying the file is too large", err)
	}
}
