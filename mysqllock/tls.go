package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/tlsurl"
	"github.com/go-sql-driver/mysql"
)

// urlTLS sets cfg's TLS configuration from the URL's ca, cert, key and
// insecure_skip_verify, which need tls=true (or tls=skip-verify).
func urlTLS(ctx context.Context, cfg *mysql.Config, q url.Values) error {
	if !tlsurl.Has(q) {
		return nil
	}
	if cfg.TLSConfig != "true" && cfg.TLSConfig != "skip-verify" {
		return fmt.Errorf("mysqllock: %w: ca, cert, key and insecure_skip_verify need tls=true", dlock.ErrInvalidURL)
	}
	tc, err := tlsurl.Config(ctx, q)
	if err != nil {
		return fmt.Errorf("mysqllock: %w: %v", dlock.ErrInvalidURL, err)
	}
	if cfg.TLSConfig == "skip-verify" {
		tc.InsecureSkipVerify = true
	}
	cfg.TLS, cfg.TLSConfig = tc, ""
	return nil
}

// hintTLS adds a hint to an "access denied" met without TLS: MariaDB
// answers so, not with MySQL's "insecure transport" error, when
// require_secure_transport refuses a plaintext connection.
func hintTLS(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1045 {
		return fmt.Errorf("%w (without TLS: if the server has require_secure_transport=ON, MariaDB refuses so; use tls=true)", err)
	}
	return err
}
