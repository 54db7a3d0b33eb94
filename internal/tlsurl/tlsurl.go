// Package tlsurl builds a client TLS configuration from a backend URL's
// query parameters, the same way for every backend that takes them:
//
//	ca=FILE                    PEM CA certificate(s) to trust instead of the system's
//	cert=FILE&key=FILE         a client certificate and its key (PEM)
//	insecure_skip_verify=true  do not verify the server's certificate (explicit only)
//
// The server's name is verified against the host each connection dials,
// unless the caller sets ServerName. Errors name the parameter, never the
// file's path: a key's path can say more than it should in a log.
package tlsurl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/dlock/dlock/internal/smallfile"
)

// Params are the query parameters Config reads.
var Params = []string{"ca", "cert", "key", "insecure_skip_verify"}

// Has reports whether q sets any of Params.
func Has(q url.Values) bool {
	for _, p := range Params {
		if q.Has(p) {
			return true
		}
	}
	return false
}

// Del removes Params from q.
func Del(q url.Values) {
	for _, p := range Params {
		q.Del(p)
	}
}

// Config returns a client TLS configuration (TLS 1.2 or later) from q's
// Params. Its error says which parameter is wrong and why, without the
// file's path.
func Config(ctx context.Context, q url.Values) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if v := q.Get("insecure_skip_verify"); q.Has("insecure_skip_verify") {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("insecure_skip_verify=%q: want true or false", v)
		}
		c.InsecureSkipVerify = b
	}
	if q.Has("ca") {
		b, err := read(ctx, "ca", q.Get("ca"))
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(b) {
			return nil, errors.New("ca: no PEM certificate in the file")
		}
	}
	if q.Has("cert") != q.Has("key") {
		return nil, errors.New("cert and key go together: a client certificate needs both")
	}
	if q.Has("cert") {
		cb, err := read(ctx, "cert", q.Get("cert"))
		if err != nil {
			return nil, err
		}
		kb, err := read(ctx, "key", q.Get("key"))
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(cb, kb)
		if err != nil {
			return nil, fmt.Errorf("cert/key: %v", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// read reads the file named by parameter p; its error leaves the path out.
func read(ctx context.Context, p, path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("%s: empty file name", p)
	}
	b, err := smallfile.Read(ctx, path, smallfile.MaxPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read the file: %v", p, err)
	}
	return b, nil
}

// HintPlaintext adds a hint to err when a plaintext connection was closed
// by the server at once (EOF, reset), as a TLS-only port does: the user
// likely wants tlsForm (e.g. "rediss://" or "tls=true").
func HintPlaintext(err error, tlsForm string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection reset") {
		return fmt.Errorf("%w (the server closed the connection: if it takes TLS only, use %s)", err, tlsForm)
	}
	return err
}
