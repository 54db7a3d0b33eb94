// Package smallfile reads the small files a user names in a URL or a flag
// (a password, a backend URL, a certificate) with a bound on their size,
// so that a wrong path (/dev/zero, a log, a disk image) is a clear error
// instead of running out of memory.
package smallfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Limits for the files dlock reads.
const (
	MaxSecret = 64 << 10 // a password or a backend URL
	MaxPEM    = 4 << 20  // a certificate bundle or a key
)

// ErrTooLarge is wrapped by Read's error for a file over its limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the content of the file at path, or an error if it holds
// more than max bytes. Its errors leave the path out (the caller names the
// file or the parameter as it sees fit).
func Read(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes: is it the right file?", ErrTooLarge, max)
	}
	return b, nil
}

// OthersCanRead reports whether every user of the machine may read the
// file at path (its mode grants read to "others"), as a file holding a
// secret should not. It reports false if the file cannot be examined.
func OthersCanRead(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o004 != 0
}
