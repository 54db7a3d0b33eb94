package redisnode

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dlock/dlock"
)

// noPermCommand finds the command a NOPERM reply names, in a reply to a
// command or to a script's redis.call.
var noPermCommand = regexp.MustCompile(`no permissions to run the '([^']+)' command`)

// PermissionError returns err unchanged unless it carries a Redis NOPERM
// reply, or the error of a script whose redis.call an ACL refused (a
// command, a key or a channel). It
// then names the missing right, keeps Redis's own text, and wraps
// dlock.ErrInvalidConfig: waiting cannot cure a missing grant, so a Lock
// fails at once instead of retrying until its ctx ends. prefix is the
// client's key prefix, which the user's key and channel patterns must cover.
func PermissionError(err error, prefix string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	inScript := strings.Contains(msg, "The user executing the script can't")
	if !inScript && !strings.Contains(msg, "NOPERM") {
		return err
	}
	var right string
	switch m := noPermCommand.FindStringSubmatch(msg); {
	case m != nil:
		right = "command " + strings.ToUpper(m[1])
	case inScript && strings.Contains(msg, "command or subcommand"):
		// Redis 7.0 does not say which: its ACL LOG does.
		right = "a command dlock's Lua scripts call"
	case strings.Contains(msg, "channel"):
		right = "channels " + prefix + ":* (ACL pattern &" + prefix + ":*)"
	case strings.Contains(msg, "key"):
		right = "keys " + prefix + ":* (ACL pattern ~" + prefix + ":*)"
	default:
		right = "a command, key or channel"
	}
	return fmt.Errorf("redislock: missing ACL permission for %s (%w; the grant is in the redislock package doc): %w",
		right, dlock.ErrInvalidConfig, err)
}
