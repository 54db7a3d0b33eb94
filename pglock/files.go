package pglock

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/smallfile"
	"github.com/jackc/pgservicefile"
)

// pgFiles are the parameters naming files that pgx reads whole; sslrootcert
// may also be the word "system" (the system's CAs).
var pgFiles = []string{"sslrootcert", "sslcert", "sslkey", "passfile", "servicefile"}

// checkFiles checks the files pgx will read before it reads them, with
// no bound on size or time: each must be a regular file of at most
// smallfile.MaxPEM bytes, so that a wrong path (/dev/zero, a log, a named
// pipe) is ErrInvalidURL rather than a process out of memory or an Open
// that never returns. pgx takes each file from the URL, else from the
// service the URL or PGSERVICE names, else from the environment
// (PGSSLROOTCERT, ...): each file is checked where pgx takes it.
func checkFiles(ctx context.Context, q url.Values) error {
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
	env := func(k string) string { return os.Getenv("PG" + strings.ToUpper(k)) }
	for _, k := range pgFiles {
		for _, path := range q[k] {
			if err := check(k, "from the URL", path); err != nil {
				return err
			}
		}
	}
	service, ok := q.Get("service"), q.Has("service")
	if !ok {
		service, ok = os.LookupEnv("PGSERVICE")
	}
	var settings map[string]string
	if ok && service != "" {
		file, from := q.Get("servicefile"), "from the URL"
		if !q.Has("servicefile") {
			file, from = env("servicefile"), "from PGSERVICEFILE"
		}
		if file == "" {
			if home, err := os.UserHomeDir(); err == nil {
				file, from = filepath.Join(home, ".pg_service.conf"), "the default"
			}
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
	for _, k := range pgFiles {
		if q.Has(k) {
			continue
		}
		if v, ok := settings[k]; ok {
			if err := check(k, "from service "+service, v); err != nil {
				return err
			}
			continue
		}
		if err := check(k, "from PG"+strings.ToUpper(k), env(k)); err != nil {
			return err
		}
	}
	return nil
}
