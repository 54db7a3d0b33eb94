package main

import (
	"context"
	"os"
	"time"

	"github.com/dlock/dlock"
	"github.com/spf13/cobra"
)

// addBackendFlag adds --backend, defaulting to $DLOCK_URL.
func addBackendFlag(cmd *cobra.Command, url *string) {
	cmd.Flags().StringVar(url, "backend", "", "backend URL (default $DLOCK_URL), e.g. redis://127.0.0.1:6379 or etcd://127.0.0.1:2379")
}

// openBackend opens the backend named by --backend or $DLOCK_URL. Every
// failure is a one-line exit-2 error, without the URL's password.
func openBackend(ctx context.Context, url string) (*dlock.Client, error) {
	if url == "" {
		url = os.Getenv("DLOCK_URL")
	}
	if url == "" {
		return nil, fail(exitUsage, "no backend: give --backend URL or set DLOCK_URL")
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := dlock.Open(ctx, url)
	if err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	return c, nil
}
