// Package smallfile reads the small files a user names in a URL or a flag
// (a password, a backend URL, a certificate) with a bound on their size,
// so that a wrong path (/dev/zero, a log, a disk image) is a clear error
// instead of running out of memory, and a bound on time, so that a named
// pipe with no writer is an error when the caller's ctx ends instead of a
// hang.
package smallfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// Limits for the files dlock reads.
const (
	MaxSecret = 64 << 10 // a password or a backend URL
	MaxPEM    = 4 << 20  // a certificate bundle or a key
)

// ErrTooLarge is wrapped by Read's error for a file over its limit.
var ErrTooLarge = errors.New("file too large")

// ErrNotRegular is Regular's error for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Read returns the content of the file at path, or an error if it holds
// more than max bytes or ctx ends before a pipe or a socket delivers. Opening never waits: a named pipe
// with no writer reads as empty, and one whose writer is silent is read
// until ctx ends. Its errors leave the path out (the caller names the
// file or the parameter as it sees fit).
func Read(ctx context.Context, path string, max int64) ([]byte, error) {
	// A regular file is read whatever ctx says: reading it cannot wait, and
	// a caller checking its input before it connects then reports a wrong
	// file before an ended ctx.
	//
	// O_NONBLOCK: open(2) of a FIFO without a writer blocks otherwise. Go
	// polls a FIFO it opened, so the deadline below interrupts its reads;
	// for a regular file or a device the flag changes nothing.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, bare(err)
	}
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
	defer stop()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			return nil, fmt.Errorf("a pipe or socket, not read to its end before ctx ended: %w", ctx.Err())
		}
		return nil, bare(err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes: is it the right file?", ErrTooLarge, max)
	}
	return b, nil
}

// Regular returns ErrNotRegular if path (after symbolic links) is not a
// regular file: a file that a client library reads again by itself, and
// would wait on for ever if it were a pipe, must be one.
func Regular(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return bare(err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (%s): the client library reads it again itself", ErrNotRegular, kind(fi.Mode()))
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

// bare drops the *fs.PathError around err, which names the path.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// OthersCanRead reports whether every user of the machine may read the
// file at path (its mode grants read to "others"), as a file holding a
// secret should not. It reports false if the file cannot be examined.
func OthersCanRead(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o004 != 0
}
