package pglock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/smallfile"
	"github.com/jackc/pgservicefile"
)

// pgFiles are the parameters naming files that pgx reads whole; sslrootcert
// may also be the word "system" (the system's CAs).
var pgFiles = []string{"sslrootcert", "sslcert", "sslkey", "passfile", "servicefile"}

// checkFiles checks the files pgx will read before it reads them, with no
// bound on size or time: each must be a regular file of at most
// smallfile.MaxPEM bytes, so that a wrong path (/dev/zero, a log, a named
// pipe) is ErrInvalidURL rather than a process out of memory or an Open
// that never returns.
//
// pgx takes each file from the URL, else from the service the URL or
// PGSERVICE names, else from the environment (PGSSLROOTCERT, ...), else
// from the home directory (~/.pgpass, ~/.postgresql/root.crt, ...): each
// is checked where pgx takes it, and only if pgx would read it. A file the
// URL names must exist; one from elsewhere that does not is left to pgx,
// which ignores a missing passfile and says itself what else is missing.
func checkFiles(ctx context.Context, q url.Values, hasPassword bool) error {
	check := func(k, from, path string) error {
		if path == "" || k == "sslrootcert" && path == "system" {
			return nil
		}
		err := smallfile.Regular(path)
		if err == nil {
			_, err = smallfile.Read(ctx, path, smallfile.MaxPEM)
		}
		if err != nil {
			return fmt.Errorf("pglock: %w: %s %s (%s): %v", dlock.ErrInvalidURL, k, path, from, err)
		}
		return nil
	}
	for _, k := range pgFiles {
		for _, path := range q[k] {
			if err := check(k, "from the URL", path); err != nil {
				return err
			}
		}
	}
	env := func(k string) string { return os.Getenv("PG" + strings.ToUpper(k)) }
	home, _ := os.UserHomeDir()
	defaults := map[string]string{}
	if home != "" {
		defaults["passfile"] = filepath.Join(home, ".pgpass")
		defaults["servicefile"] = filepath.Join(home, ".pg_service.conf")
		defaults["sslrootcert"] = filepath.Join(home, ".postgresql", "root.crt")
		// pgx takes the default certificate and key only as a pair.
		cert, key := filepath.Join(home, ".postgresql", "postgresql.crt"), filepath.Join(home, ".postgresql", "postgresql.key")
		if exists(cert) && exists(key) {
			defaults["sslcert"], defaults["sslkey"] = cert, key
		}
	}
	// elsewhere is where pgx takes k from when the URL does not name it.
	elsewhere := func(k string, settings map[string]string, service string) (path, from string) {
		if v, ok := settings[k]; ok {
			return v, "from service " + service
		}
		if v := env(k); v != "" {
			return v, "from PG" + strings.ToUpper(k)
		}
		return defaults[k], "pgx's default"
	}
	var settings map[string]string
	service, ok := q.Get("service"), q.Has("service")
	if !ok {
		service = os.Getenv("PGSERVICE")
	}
	if service != "" {
		file, from := q.Get("servicefile"), "from the URL"
		if !q.Has("servicefile") {
			file, from = elsewhere("servicefile", nil, "")
		}
		if err := check("servicefile", from, file); err != nil {
			return err
		}
		if b, err := smallfile.Read(ctx, file, smallfile.MaxPEM); err == nil {
			if sf, err := pgservicefile.ParseServicefile(bytes.NewReader(b)); err == nil {
				if s, err := sf.GetService(service); err == nil {
					settings = s.Settings
				}
			}
		}
	}
	setting := func(k string) string { // as pgx has it: URL, service, environment
		if q.Has(k) {
			return q.Get(k)
		}
		if v, ok := settings[k]; ok {
			return v
		}
		return env(k)
	}
	// pgx reads the client certificate and key only to use TLS with them.
	noClientCert := setting("sslmode") == "disable" || setting("sslcertmode") == "disable"
	hasPassword = hasPassword || q.Get("password") != "" || settings["password"] != "" || env("password") != ""
	for _, k := range pgFiles {
		switch {
		case q.Has(k), k == "servicefile": // checked above
			continue
		case k == "passfile" && hasPassword: // pgx reads it for a missing password only
			continue
		case (k == "sslcert" || k == "sslkey") && noClientCert:
			continue
		}
		path, from := elsewhere(k, settings, service)
		if path == "" || !exists(path) {
			continue
		}
		if err := check(k, from, path); err != nil {
			return err
		}
	}
	return nil
}

// exists reports whether path names something (a broken symbolic link
// does not).
func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// hasPassword reports whether u gives a password in its user info (pgx,
// like libpq, takes an empty one as none and reads the passfile).
func hasPassword(u *url.URL) bool {
	pw, _ := u.User.Password()
	return pw != ""
}

// pgxQuery returns rawQuery's parameters as pgx reads them (each value
// percent-decoded, '+' left a plus) and rawQuery as written less the
// parameters in drop, for pgx. A parameter given twice, of which pgx would
// take one and dlock's checks another, is ErrInvalidURL.
func pgxQuery(rawQuery string, drop ...string) (url.Values, string, error) {
	q := url.Values{}
	var keep []string
	for _, kv := range strings.Split(rawQuery, "&") {
		if kv == "" {
			continue
		}
		rk, rv, _ := strings.Cut(kv, "=")
		k, err1 := url.PathUnescape(rk)
		v, err2 := url.PathUnescape(rv)
		if err := errors.Join(err1, err2); err != nil {
			return nil, "", fmt.Errorf("pglock: %w: %v", dlock.ErrInvalidURL, err)
		}
		if q.Has(k) {
			return nil, "", fmt.Errorf("pglock: %w: %s is given twice", dlock.ErrInvalidURL, k)
		}
		q.Set(k, v)
		if !slices.Contains(drop, k) {
			keep = append(keep, kv)
		}
	}
	return q, strings.Join(keep, "&"), nil
}

// connString is u as pgx should read it, with rawQuery as its query.
func connString(u *url.URL, rawQuery string) string {
	v := *u
	v.Scheme = "postgres"
	v.RawQuery = rawQuery
	if v.Path == "" {
		// pgx, like libpq, takes everything before the first '@' ahead of
		// any '/' as user info, even in the query: with no path, a query
		// holding an '@' would name another host to pgx than to dlock, and
		// hide its parameters from checkFiles.
		v.Path = "/"
	}
	return v.String()
}
