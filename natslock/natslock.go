// Package natslock is the dlock backend for NATS JetStream key-value
// buckets, through github.com/nats-io/nats.go and its jetstream package.
//
// # URLs
//
//	nats://[user:password@]host:4222[,host2:4222…]/BUCKET[?replicas=3&storage=file]
//	tls://…/BUCKET?ca=ca.pem[&cert=client.pem&key=client-key.pem]     TLS (files)
//	nats://host:4222/BUCKET?creds=app.creds | ?nkey=app.nk | ?token_file=t
//	nats://…/BUCKET?inbox_prefix=_INBOX_APP                             replies to _INBOX_APP.>
//
// The path names the bucket (default "dlock"). discovered=false keeps
// the client to the servers in the URL (it otherwise also reconnects to
// the cluster's servers the server announces, as NATS clients do). password_file= works as for
// every backend; token_file= reads a token the same way; creds= names a
// credentials file (JWT and nkey seed, from nsc) and nkey= a file holding an
// nkey seed. inbox_prefix= sets the subject prefix of the client's reply
// inboxes (see Least privilege): tokens separated by single dots, without
// wildcards, spaces or control characters, at most 256 bytes (Open refuses
// other prefixes, and a connection given to Open with one, before any
// request). Users with a connection already use Open.
//
// When the bucket is missing, Open creates it (replicas=, 1 by default;
// storage=file or memory, file by default), and so does `dlock migrate`
// with such a URL. With create=false Open refuses a missing bucket
// instead: workers whose users may not create streams (see Least
// privilege) use it, after an operator made the bucket. dlock's buckets keep one
// revision per key and allow per-message TTLs with limit markers.
//
// # TLS and authentication
//
// tls:// speaks TLS to every server and verifies its certificate against
// the host in the URL, with the system's CAs or the PEM file ca= names;
// cert= and key= give a client certificate (for servers with verify:
// true). nats:// refuses these parameters rather than ignore them. A
// refused certificate, a missing client certificate or a plaintext URL
// against a TLS-only server fails Open with nats.go's reason. Users log in
// with user:password@ (or password_file=), a token (TOKEN@ or token_file=),
// an nkey seed file (nkey=) or a credentials file (creds=: the user JWT
// and nkey seed of an operator-mode deployment, read by nats.go's
// UserCredentials). Errors never show a password, token, JWT or seed.
//
// # Least privilege
//
// Permissions(bucket) is the nats-server permissions block a dlock user
// needs for one bucket made beforehand (`dlock migrate`, or Open, as a user
// who may create streams): publish on the bucket's keys and on the
// JetStream API calls for that bucket's stream (info, direct reads, the
// ordered consumers of watches), subscribe on reply inboxes. A user with
// the block of another bucket can neither open, read, write nor purge this
// bucket's locks (TestTenantIsolation, and the other user's own client
// against its subjects). Within a bucket, NATS permissions cannot tell
// holders apart: any user of the bucket can purge any lock in it, so give
// each tenant a bucket.
//
// Replies (JetStream's answers, and what the watches of waits, lists and
// queue reads deliver) go to the client's reply inboxes, _INBOX.<random>
// by default. Permissions allows subscribing on _INBOX.>, so any user of
// the account with that block can read the replies the others' dlock
// gets (lock names, owners, labels), though not write to their buckets.
// To keep them apart within one account, give each user a reply prefix of
// its own, inbox_prefix= in the URL (nats.CustomInboxPrefix on a
// connection given to Open; nats.go's JetStream requests and ordered
// consumers all use it), and the block PermissionsInbox(bucket, prefix),
// which allows subscribing on that prefix only: another user of the
// account, whose block allows only its own prefix, is refused a
// subscription on it (TestInboxPrefix; the suite's LeastPrivilege section
// runs the core of the contract under that block). NATS's boundary between
// tenants remains the account (subjects, streams and inboxes apart,
// JetStream limits per account), as docs/security.md says.
//
// # Open checks
//
// Open refuses, with the reason and wrapping dlock.ErrInvalidConfig, a
// server without JetStream, a server older than 2.11 (per-key TTLs came in
// 2.11) and a bucket made without limit markers (LimitMarkerTTL: its keys
// could not expire one by one, and waiters would not hear of an expiry).
//
// # Layout
//
// A mutex is the key "m.<name in unpadded base64url>" holding, as JSON, the
// owner id, holder label, a random hold id, the hold's TTL and token, and
// whether waiters are queued (see Waiting).
// Acquire is a create-if-absent with the TTL as the message's own TTL;
// renewal is a write that expects the key's last revision (compare-and-set)
// and carries the TTL again; release is a purge that expects the last
// revision, so it never removes another owner's key. A renewal whose reply
// was lost leaves the key at a revision the holder did not see: the next
// renewal or the release reads the key and carries on if the hold id is
// still its own.
//
// # Fencing tokens
//
// The token is the stream sequence (revision) of the write that granted
// the hold: the create, or the release's handover to a waiter. That write
// cannot hold its own revision, so every later write of the key (the
// holder's renewals, a waiter's flag) stores it: a hold's token, as Inspect,
// List, Leader and Observe report it, is the lease's Token() from the
// grant to the release, whoever rewrites the key meanwhile.
// A stream's sequence strictly increases for the stream's life,
// over every key of the bucket: a later grant is a later message and has a
// greater sequence. It survives restarts with file storage (and on an R3
// bucket, the loss of a minority of servers and leader changes, since the
// sequence is assigned by the stream's Raft leader and replicated with the
// message). With memory storage a restart of an R1 bucket's server empties
// the stream and its sequence starts over: use file storage where tokens
// fence anything.
//
// A bucket deleted and created again starts its sequence at 1. A running
// client notices (it keeps the stream's creation time from Open and reads
// it again when a grant's token is not above every token it has seen, or
// after the bucket was reported missing) and then refuses to grant, with an
// error wrapping dlock.ErrInvalidConfig, until it is opened again. A process
// that opens the new bucket cannot know the old one's tokens: re-creating a
// bucket resets fencing, so do not, while fenced resources keep tokens.
//
// # Waiting: a fair queue in the bucket
//
// A Lock that finds the key taken queues: it puts a key of its own,
// "q.<name>.<hold id>", under its own TTL (rewritten every TTL/3 while it
// waits), watches the lock's key, and sets a flag in the holder's value
// (a compare-and-set that keeps the holder's TTL). A release that finds
// the flag hands the lock over instead of purging it: it rewrites the key,
// at the holder's revision, with the value and TTL of the waiter whose
// queue key came first (by the revision of its first write, which the key
// keeps as its place across keepalives). Every waiter's watch sees that write,
// but only the waiter it names sends anything (one wake-up per release, no
// herd of reads); it confirms with a compare-and-set of its own, counts its
// lease from that write and drops its queue key. The handover's revision
// is its token. When the lock's key is removed instead (an expiry, a force
// release, a release that raced a waiter's flag), the waiter at the head of
// the queue creates it. A waiter whose ctx ends drops its queue key and, if
// it was handed the lock meanwhile, hands it on; a release that handed the
// lock to a waiter whose queue key is gone by the time the handover is
// written (it left between the release's read of the queue and that
// write, and may have read the key before the handover) takes it back, at
// the handover's revision, for the next waiter (TestLeaveDuringHandover).
// A waiter that dies leaves
// a queue key that expires within its TTL (and one not rewritten within
// its TTL plus 1 s, by the server's timestamps against the reader's clock,
// is skipped and removed, as a server restarted by kill -9 may keep it);
// one handed the lock as it died holds it until its TTL ends. While the
// lock's key is gone and another waiter heads the queue, a waiter also
// watches that waiter's queue key, and steps again when it goes (its TTL
// ran out, or it gave up and purged it), since that writes nothing to the
// lock's key (TestDeadHeadOfQueueDoesNotStallAFreeLock,
// TestHeadGivingUpOnAFreeLockWakesTheNext). A release
// whose hold sees the flag hands over, so between live holders the order is
// the queue's. When the key is removed with waiters queued (an expiry, a
// force release), a TryLock, which never queues, or the first attempt of a
// Lock, which reads no queue so that an uncontended Lock stays one create,
// can take the lock ahead of the head of the queue.
//
// Each store call of a wait is bounded to 2 s, so that a watch or a read
// lost with a restarted server cannot stall it: over a link whose round
// trip is above 2 s a Lock that had to wait cannot confirm its grant (a
// TryLock can), and a lock handed to it stays held, by nobody, until its
// TTL. A create of a key that keeps a purge marker (for a minute after a
// release with nobody flagged, or a force release) takes three round trips
// in nats.go, so taking such a key after a wait needs a round trip under
// about 0.6 s (TestSlowHeadTakesAFreeLock: 0.6 s, taken in 3.9 s). A wait whose ctx ends while the server does not answer returns up
// to 2 s late, after its clean-up (its queue key, a handover to pass on),
// whose steps share that bound; its watches' unsubscribes, which nats.go
// bounds only by its own 5 s request timeout, go on without it.
//
// Reading the queue (at a handover, and when the head looks for the lock)
// creates a short-lived ordered consumer on the queue's subjects, so a
// handover costs more than an uncontended release, which is one purge.
//
// # Per-name state that stays
//
// Nothing: a fencing token is the stream sequence of the granting write,
// which the bucket's stream keeps counting for every key, so no counter per
// name is needed. A release purges the key, leaving a purge marker (a limit
// marker) that expires after 1 minute; a queue key ends with its waiter or
// its TTL. A bucket used for 10,000 names once holds nothing of them a
// minute later.
//
// # Guarantees and non-guarantees
//
//   - Mutual exclusion holds through JetStream's per-subject
//     compare-and-set: on an R3 (or R5) bucket it is decided by the stream's
//     Raft group and survives the loss of a minority of servers; on an R1
//     bucket it lives on one server, and if that server loses its store
//     (memory storage, a lost disk) every lock on it is freed.
//   - A lease is declared lost before its key can expire: validity is
//     counted from the sending of the last write the server acknowledged, and
//     the server counts the TTL from when it stored the write. A waiter's
//     flag rewrites the holder's key with the time it has left, from the
//     server's timestamp of the holder's last write and the TTL that write
//     carried, against the waiter's clock, rounded up to the next whole
//     second: so this holds while waiters' clocks run less than 1 s ahead
//     of the server's. A waiter's clock further ahead could shorten the
//     holder's key by the difference.
//   - A leader change on an R3 bucket does not end a lease: the key and its
//     TTL are replicated; writes stall until a new leader is elected
//     (nats-server's election timeout is 4-9 s; the fault suite's leader
//     kill saw the next grant 4.7-8 s after the kill), and a renewal that
//     cannot get through within the lease's margin makes dlock declare the
//     lease lost, as with any store: use TTLs well above 10 s on R3. A
//     write caught by the leader's death (sent to it, or through a
//     connection to it, as it died) gets no reply at all and waits for its
//     ctx (nats.go's 5 s if ctx has no deadline): a TryLock or Unlock given
//     a ctx of minutes waits that long, so give them seconds and try again.
//   - Close of the client first does what it does on every backend:
//     waits are woken (each then cleans up, bounded as above), and the
//     calls in flight and the releases of held leases get up to 10 s to
//     finish. Then it ends every driver call still
//     in flight, even on a connection Open was given and does not close: a
//     wait, a release or a renewal returns an error wrapping
//     dlock.ErrClosed and does not retry on the closed connection (a grant
//     that arrives as the client closes is left to its TTL if the
//     connection is gone). Against a server that does not answer, Close
//     can so take that 10 s and more.
//   - Re-entry by owner is counted within a client, not in the store.
//   - TTLs are whole seconds, at least 1 s (the server's TTL unit).
//   - No read-write locks or semaphores (see kindsNote); elections are
//     dlock's portable ones, on a mutex.
package natslock

import (
	"context"
	"fmt"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// URL schemes of the backend.
const (
	Scheme    = "nats"
	SchemeTLS = "tls"
)

// DefaultBucket is the bucket of a URL without a path.
const DefaultBucket = "dlock"

func init() {
	dlock.Register(Scheme, driver.OpenerFunc(openURL))
	dlock.Register(SchemeTLS, driver.OpenerFunc(openURL))
}

// Options configure Open.
type Options struct {
	// Bucket is the key-value bucket of the locks (DefaultBucket if empty).
	Bucket string
	// Replicas and Storage are used when the bucket is created (1 and
	// file storage by default).
	Replicas int
	Storage  jetstream.StorageType
	// NoCreate makes Open fail on a missing bucket instead of creating it
	// (Migrate creates it).
	NoCreate bool
	// Client are options for the dlock client.
	Client []dlock.ClientOption
	// CloseConn makes Close of the dlock client close the connection too.
	CloseConn bool
}

// Open returns a dlock client over an existing NATS connection. It
// refuses, wrapping dlock.ErrInvalidConfig, a connection whose inbox
// prefix (nats.CustomInboxPrefix) the URL's inbox_prefix= would refuse.
func Open(ctx context.Context, nc *nats.Conn, opts Options) (*dlock.Client, error) {
	if p := nc.Opts.InboxPrefix; p != "" {
		if err := checkInboxPrefix(p); err != nil {
			return nil, fmt.Errorf("natslock: %w: the connection's inbox prefix: %v", dlock.ErrInvalidConfig, err)
		}
	}
	d, err := newDriver(ctx, nc, opts)
	if err != nil {
		return nil, err
	}
	return dlock.New(d, Scheme, opts.Client...), nil
}

// maxBucket is the longest bucket name: its stream, "KV_" and the name,
// must fit JetStream's 255 bytes.
const maxBucket = 255 - len("KV_")

// checkBucket says why JetStream would refuse b ("" is the default) as a
// key-value bucket's name, or returns nil: such a name passed Open's
// parsing and failed with an untyped error of the server's, quoting the
// name whole.
func checkBucket(b string) error {
	if len(b) > maxBucket {
		return fmt.Errorf("bucket name of %d bytes: at most %d", len(b), maxBucket)
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("bucket %q: a bucket's name holds only letters, digits, _ and -", b)
		}
	}
	return nil
}
