package etcdlock

import (
	"errors"
	"fmt"

	"github.com/dlock/dlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// permErr returns err unchanged unless etcd refused it for want of a right
// or a user. It then names what is missing, keeps etcd's own text, and
// wraps dlock.ErrInvalidConfig: waiting cannot cure a missing grant, so a
// Lock fails at once instead of retrying until its ctx ends.
func permErr(err error, prefix string) error {
	var what string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		what = fmt.Sprintf("permission: the user's role needs readwrite on the keys with prefix %q (see the etcdlock package doc)", prefix)
	case errors.Is(err, rpctypes.ErrUserEmpty):
		what = "user: etcd has authentication enabled; give etcd://user:password@…"
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrAuthOldRevision):
		what = "credentials: etcd refused the user or password"
	default:
		return err
	}
	return fmt.Errorf("etcdlock: missing %s (%w): %w", what, dlock.ErrInvalidConfig, err)
}
