package natslock

import (
	"fmt"
	"strings"
)

// Permissions returns the least-privilege nats-server permissions block for
// a dlock user of bucket (created beforehand, by `dlock migrate` as another
// user or by an operator): publish on the bucket's keys and the JetStream
// API calls dlock makes for it (account info, the bucket's stream info,
// direct reads, and the ordered consumers of watches), subscribe on reply
// inboxes (_INBOX.>, nats.go's default). Nothing of any other bucket or
// stream, and no stream create, update or delete. Use it as a user's
// permissions in an authorization block, or in an account's users.
//
// Every user of the account with this block can subscribe on _INBOX.> and
// so read the replies the others get: where users of one account must not
// see each other's replies, give each its own prefix with
// PermissionsInbox.
func Permissions(bucket string) string {
	return PermissionsInbox(bucket, "_INBOX")
}

// PermissionsInbox is Permissions with subscribe rights on inboxPrefix.>
// only: the block for a client that uses that reply prefix (the URL's
// inbox_prefix=, or nats.CustomInboxPrefix on a connection given to Open).
// Give each user of an account a prefix of its own, which no other user's
// block allows, so that no other user can subscribe to its replies.
func PermissionsInbox(bucket, inboxPrefix string) string {
	s := "KV_" + bucket
	pub := []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO." + s,
		"$KV." + bucket + ".>",
		"$JS.API.DIRECT.GET." + s + ".>",
		"$JS.API.STREAM.MSG.GET." + s,
		"$JS.API.CONSUMER.CREATE." + s + ".>",
		"$JS.API.CONSUMER.CREATE." + s,
		"$JS.API.CONSUMER.DELETE." + s + ".>",
		"$JS.API.CONSUMER.INFO." + s + ".>",
		"$JS.FC." + s + ".>",
	}
	return fmt.Sprintf("{\n  publish: { allow: [%s] }\n  subscribe: { allow: [%q] }\n}", quoteAll(pub), inboxPrefix+".>")
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
