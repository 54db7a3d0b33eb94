// Package redislock is the dlock backend for Redis: a single server,
// Sentinel, or Cluster, through github.com/redis/go-redis/v9.
//
// # URLs
//
//	redis://[user:password@]host:6379[/db][?go-redis options]   single server
//	rediss://…                                                  the same over TLS
//	redis+sentinel://[user:password@]s1:26379,s2:26379/mymaster[?db=0&…]
//	redis+cluster://[user:password@]h1:6379,h2:6379[?…]          Cluster seeds
//
// (and rediss+sentinel, rediss+cluster). Query parameters are go-redis's
// (dial_timeout, read_timeout, pool_size, …), plus prefix=NAME for the key
// prefix (default "dlock"; no ':', see "Least privilege") and scripts=eval
// to run the scripts with EVALSHA instead of as Redis Functions (see
// "Scripts"). A client built from a URL follows context
// deadlines (go-redis's ContextTimeoutEnabled), and has a dial timeout of 2 s
// and read and write timeouts of 3 s unless the URL sets its own. Users with
// a client already use Open.
//
// # TLS
//
//	rediss://host:6379[/db]?ca=/etc/dlock/ca.pem[&cert=client.pem&key=client-key.pem]
//	rediss+sentinel://s1:26379,s2:26379/mymaster?ca=…   rediss+cluster://h1:6379,h2:6379?ca=…
//
// The rediss schemes speak TLS (1.2 or later) to every server, sentinel and
// Cluster node, and verify each certificate against the host dlock dials
// (for a Cluster, each node's own address, not the first seed's name) and
// the system's CAs, or the PEM file ca= names instead. cert= and key= give
// a client certificate (for tls-auth-clients yes). insecure_skip_verify=true
// turns verification off (go-redis's own skip_verify=true too); nothing
// else does. The plaintext schemes refuse these parameters rather than
// ignore them. A plaintext URL against a TLS-only port fails at Open, at
// once, saying the server speaks TLS only (dlock checks with a handshake of
// its own when a server closes a new connection without answering) and
// suggesting rediss, where go-redis alone would retry (for Sentinel, some
// 12 s) and report EOF. Errors never show a key's path.
//
// # Your own client
//
// dlock gives every renewal a deadline: the lease's, a margin before the
// lock can expire in Redis. go-redis ignores context deadlines unless its
// options set ContextTimeoutEnabled, so a renewal sent over a connection
// that went silent (a network partition, a dropped route) waits out
// ReadTimeout (3 s by default) instead, and the holder can learn it lost the
// lock after another client took it. Set, on the client passed to Open:
//
//	ContextTimeoutEnabled: true,
//	DialTimeout:  2 * time.Second, // or less; a bound on reconnects
//	ReadTimeout:  3 * time.Second, // bounds calls without a deadline
//	WriteTimeout: 3 * time.Second,
//
// Open logs a warning (through Options.Logger) when it can see the client
// does not follow context deadlines (*redis.Client, *redis.ClusterClient).
//
// A Cluster client also needs a short ClusterStateReloadInterval (a URL's
// client has 1 s): go-redis reloads its map of slots to nodes when a node
// answers MOVED, and otherwise every 60 s by default, so after a master
// dies (nothing answers at its address) the client goes on sending the
// lock's commands there for up to that long after its replica took over:
// renewals fail and leases the replica kept are declared lost, and Lock
// fails with the dead address's dial error.
//
// # Logs
//
// dlock's own log lines go to the dlock client's logger. So do the lines
// go-redis logs about a go-redis client dlock made from a URL (failed
// dials, pool trouble), as warnings: go-redis has one process-wide logger
// (redis.SetLogger), and opening such a client installs, once per process,
// one that sends those lines to their dlock client's logger and every
// other line to stderr as go-redis's default does. An application that
// sets its own go-redis logger afterwards takes all of them back. A client
// given to Open is the application's: dlock adds no hook to it, and its
// lines go where the application sends them.
//
// dlock reuses the argument slices of the scripts it calls (FCALL) once
// go-redis's Process has returned. A hook of the application's that keeps
// a command past its return (to log it later from another goroutine, say)
// must copy cmd.Args() first; hooks that read a command while it runs, as
// go-redis's OpenTelemetry hooks do, need nothing.
//
// # Layout
//
// A lock is a hash "<prefix>:{<name>}" of owner id → hold count, with a
// PEXPIRE; its fencing token comes from the counter "<prefix>:{<name>}:token",
// taken in the same script as each new hold. The hash also keeps, in fields
// starting with NUL, the token, the holder's label (dlock.WithLabel; the
// first hold's, which a re-entry keeps) and the last requests that changed
// the hold. Waiters queue in the list "<prefix>:{<name>}:queue", their
// places (expiry, TTL, channel, owner and label) in the hash
// "<prefix>:{<name>}:queueinfo", and a release hands the lock, with the
// waiter's label, to the first live waiter and tells it so on its client's
// channel "<prefix>:handoffs:<id>". Braces, and "%", in names are
// percent-escaped inside the hash tag, so every key of a lock stays in one
// Cluster slot. Acquire, re-entry, renewal and release
// are each one Lua script. The Redlock backend (package redlock) keeps the
// same layout, with the same scripts, on each of its masters.
//
// # Scripts
//
// On Redis 7.0 and later the scripts run as Redis Functions: one library,
// "dlock_<digest of its code>" (two dlock versions with different scripts
// use two libraries), called with FCALL. Workers then need +fcall and no
// right to run scripts of their own: a tenant who could EVAL could stall
// the whole server ("while true do end") for every tenant. The library is
// loaded once per server by `dlock migrate` (Client.Migrate) run as a user
// with +function|load, or by any client whose user has that right, on
// first use; it lives in the server's RDB/AOF like data, so a server that
// restarts without persistence needs it again (clients that may load it do
// so by themselves; the others fail with an error wrapping
// dlock.ErrInvalidConfig that says to run dlock migrate). Servers older
// than 7.0 (no FCALL), and clients opened with scripts=eval in the URL
// (Options.Eval), run the same scripts with EVALSHA, falling back to EVAL on
// NOSCRIPT; their user needs +evalsha +eval instead of +fcall, which lets
// it run any script. BenchmarkScripts compares the two; the server's time
// per call is the same within the noise of a loaded machine.
//
// # Waiting
//
// Waiters are served in arrival order across processes. A waiter keeps a
// place in the queue alive by refreshing it every second; a place not
// refreshed for 3 s expires, so a dead waiter never blocks the queue. A lock
// handed to a waiter starts with a TTL of at most 3 s, which its new holder
// extends at once: if the waiter died just before the handoff, the next one
// waits at most that long. Each client subscribes, on one pub/sub
// connection, to a channel of its own, which its queued requests name; a
// handoff is published there, so it wakes the one process (and there the
// one goroutine) it is for, not every waiting process. A waiter also
// retries when the holder's TTL runs out, since an expiry sends no message.
//
// A handoff message only wakes the waiter: a process paused after it
// arrived reads it when the handed lock may have expired and gone to
// another waiter. The waiter's next acquire script is the proof: it finds
// the lock held by the waiter's request (and extends it to the TTL), and
// the grant counts from that script's send time; otherwise the waiter keeps
// waiting. A waiter that gives up leaves the queue, and passes on a lock
// handed to it meanwhile.
//
// # Read-write locks and semaphores
//
// A read-write lock (dlock's RWMutex: read and write holds) and a
// semaphore of a name are locks of their own, beside the mutex of that
// name, in keys of their own in the same hash slot: "<prefix>:{<name>}:rw"
// and "<prefix>:{<name>}:sem", each with ":exp", ":token", ":queue" and
// ":queueinfo" keys. The first is a hash of holds (field: kind letter and
// owner id; value: hold count, token, the last requests that changed the
// hold, label) and, for a semaphore, the permit count its holders use;
// ":exp" a sorted set of each hold's expiry on the server's clock, since
// every hold has a lease of its own (Redis before 7.4 keeps no TTL per
// hash field): every script first drops the holds whose lease ran out.
// Every grant takes the next value of its lock's ":token" counter (one for
// both kinds of a read-write lock, one per semaphore), so a write hold's
// token is above every earlier read's, and each permit holder has its own.
//
// Waiting is the mutex's: one fair queue per lock, refreshed places, a
// handoff that only wakes the waiter, proven by its next script, and undone
// when a waiter gives up. A write hold is granted when nothing is held, a
// read hold when no write hold is, a permit while fewer than the count are
// held; a request that finds anyone queued queues behind them, so a waiting
// writer holds back the readers that arrive after it. A release (or a
// waiter giving up, or a lease found expired) serves the queue from its
// head for as long as the waiters there fit: every reader up to the first
// writer that must wait, a writer once nothing is held, permits while any
// is free. A semaphore request whose permit count differs from the one its
// live holders use fails with ErrLimitMismatch; with no live holder, the
// new count replaces the old. Inspect of a read-write lock or semaphore
// lists every live hold. A read request by the owner of the write hold
// (or the reverse) is not a re-entry: it waits like any other (dlock itself
// gives a read under a write hold a lease on the write hold, and refuses a
// read-to-write upgrade).
//
// # Guarantees and non-guarantees
//
//   - Mutual exclusion (and a semaphore's count) holds while the Redis
//     server (or the Cluster shard that owns the lock's slot) keeps its
//     data. Replication is asynchronous: if a master fails over before a
//     lock reached its replica, the new master has no such lock and grants
//     it again; if only the lock's latest renewals had not reached it, the
//     new master expires the lock at the earlier time, before the holder's
//     lease ends. In both cases the holder hears nothing: its lease looks
//     live (Err nil, TimeLeft as before) while another client holds the
//     lock, until its next renewal finds the hold gone. A failover cuts a
//     lock short this way even when the replica had every write at the
//     moment its master stopped answering: a renewal sent to the stopped
//     master waits in its socket, and when the master resumes it runs the
//     renewal and answers OK before it learns it was deposed (an adversary
//     pass on a Cluster: the holder's lease outlived the lock on the new
//     master by about one renewal interval, and another client was granted
//     it meanwhile). min-replicas-to-write does not prevent it (the master
//     checks its replicas once a second, after it has run what waited).
//     Use Redlock (package redlock, mutexes only) or a consensus
//     store (etcd, ZooKeeper) where that matters, and fencing tokens in any
//     case.
//   - Fencing tokens strictly increase while the token counter survives. A
//     restart without persistence (or with AOF not fsynced every write)
//     or a failover that loses writes resets or rewinds the counter, and
//     tokens can then repeat. Enable appendonly with appendfsync always where
//     tokens must survive restarts. Tokens stay below 2^53, the last integer
//     Redis's Lua counts exactly: a counter set past it by hand makes every
//     new hold fail with an error that says so.
//   - An evicted key is a silently lost lock. Open reads maxmemory-policy; if
//     it is not noeviction it logs a warning, and Inspect reports it in Notes.
//   - A holder that cannot reach Redis declares its lease lost before the key
//     can expire (see package dlock), provided its client follows context
//     deadlines (see "Your own client"); a holder paused past its TTL cannot.
//   - go-redis sends a command again when the connection breaks before its
//     reply arrives (MaxRetries, 3 by default), so a script can run twice.
//     Every acquire and release carries an id of its own, and the lock
//     remembers the last 16 that changed it: a script run twice acts once.
//     Past those 16 (other processes of the same owner changing the hold
//     meanwhile), it remembers, per client, the latest id it forgot, and a
//     release sent again that it can no longer tell from one that ran is
//     refused rather than run twice: see the next point.
//     The one visible trace: an Unlock whose final release ran, lost its
//     reply and was sent again reports ErrLeaseLost, though it released the
//     lock.
//   - The store never keeps counting a hold the client has forgotten. An
//     attempt whose reply is lost is undone; a release, or an undo, that
//     fails without a certain answer is sent again, as the same request,
//     before the owner's next Lock or Unlock of that name in the process,
//     and that call fails while it still cannot be confirmed. Without this
//     the owner would re-enter the forgotten hold (with its old token), and
//     the lock would outlive each later Unlock. Meanwhile, the forgotten
//     hold ends with its TTL. If, by then (or by go-redis's retry of a
//     release whose reply was lost), other processes of the same owner
//     (WithOwner) changed the hold 16 times or more, it can no longer tell
//     whether that release ran: it is given up rather than run again,
//     which could release another process's share of the hold while its
//     lease reads valid. If it had not run, the hold keeps one count too
//     many, and the lock stays the owner's until its holds all end and it
//     expires.
//   - While a Cluster slot is being migrated by hand (CLUSTER SETSLOT
//     MIGRATING/IMPORTING, then MIGRATE key by key), Redis refuses a script
//     whose keys are split between the two nodes ("Script attempted to
//     access a non local key"): a lock's keys share one slot, but the
//     migration moves them one at a time. A Lock, Unlock or renewal that
//     meets this fails with that error; an Unlock's release stays pending
//     and is sent again as above, and a renewal is tried again soon, the
//     lease being declared lost only if none succeeds before it expires.
//     Exclusion holds; expect such errors for the length of a migration.
//
// # TTL limits
//
// Redis keeps a key's expiry in whole milliseconds, so a TTL must be a
// whole number of milliseconds (TTLResolution) and at least 6 ms: dlock
// refuses, when the lock is made, any TTL a grant could not meet (under
// about 5.13 ms a grant could never arrive with its margin left; see the
// README's "TTL limits"), and anything over ten years (ErrInvalidTTL).
//
// # Per-name state that stays
//
// Each name keeps its token counter "<prefix>:{<name>}:token" (one per
// family used: mutex, read-write lock, semaphore) after its last release,
// with no expiry: deleting it would let tokens start again at 1 and go
// backwards. That is one small key per name ever locked (the key's name
// plus a small integer, about 60 to 100 bytes of memory), so 10,000 names
// locked once leave 10,000 keys. Locking per request id grows Redis
// without bound: lock a bounded set of names instead (a hash of the id
// into N buckets), or retire counters as docs/design.md ("Per-name state
// that stays") describes.
//
// # Least privilege
//
// dlock needs these commands (those it sends, and those its scripts call:
// Redis checks both against the user's ACL) on keys and channels under its
// prefix. For the default prefix "dlock" (with prefix=NAME in the URL, or
// Options.KeyPrefix, write NAME:* instead of dlock:*):
//
//	ACL SETUSER dlock-worker on >PASSWORD resetkeys ~dlock:* resetchannels &dlock:* -@all +ping +hello +fcall +subscribe +unsubscribe +time +get +set +del +exists +incr +pttl +pexpire +hget +hmget +hset +hdel +hexists +hincrby +hgetall +lpop +rpush +lrem +lindex +llen +publish +zadd +zcard +zrange +zrangebyscore +zrem +zscore
//
// and the URL redis://dlock-worker:PASSWORD@host:6379, once an operator has
// loaded the functions (dlock migrate as the default user, or any user with
// +function|load; see "Scripts"). With scripts=eval, or on Redis before
// 7.0, write +evalsha +eval instead of +fcall. Optional: +config|get
// lets Open read maxmemory-policy and warn of eviction (without it Open
// skips the check). Client.List (dlock ls) needs nothing more: it reads
// an index under the prefix, never SCAN (see "Listing"). A Cluster client
// also needs, on every node:
//
//	ACL SETUSER dlock-worker +cluster|slots +cluster|shards +readonly +command
//
// go-redis's cluster client reads COMMAND to route each command; without
// +command it asks again on every request, logs "getting command info:
// NOPERM" each time, and a Lock+Unlock took 3.6 times as long (an adversary
// pass). The conformance suite's LeastPrivilege section, List included,
// runs as a user made with exactly the first line above; TestClusterGrant
// runs a Cluster client with both.
//
// A command, key or channel the ACL refuses gives an error that names it
// ("missing ACL permission for command FCALL", or the keys or channels
// of the prefix; for a command one of dlock's scripts calls, Redis 7.0 does
// not say which, and ACL LOG does), keeps Redis's own text, and wraps
// dlock.ErrInvalidConfig: Lock fails at once instead of waiting out its ctx.
// Open checks SUBSCRIBE and the channels by subscribing once (on a
// connection of its own, closed at once), since go-redis would retry a
// refused SUBSCRIBE in the background and waiters would never hear of a
// release.
//
// Tenants are kept apart by prefix: give each its own user, prefix and
// patterns (~a:* &a:* for prefix=a), and no user of one can read, take,
// renew, release or force-release the other's locks, run a script, or
// publish to the other's channels (Redis refuses them with NOPERM; see
// docs/security.md for what stays shared, and TestTenantAttacks). A
// prefix may not contain ':' (Open refuses it, with ErrInvalidConfig):
// prefix a's pattern ~a:* would cover every key of a prefix a:b, so one
// tenant's user would reach the other's locks; nor glob characters
// (* ? [ ] \) or braces. Within one prefix Redis cannot tell holders apart: ACLs
// grant commands and key patterns, not ownership, and releasing needs DEL on
// the lock's key, so any user with the grant for a prefix can delete any
// lock under it, with dlock unlock --force or a plain DEL. Force unlock thus
// needs no right beyond the worker grant of the lock's prefix; an operator
// who force-unlocks across tenants needs the patterns of each (~* &* for
// all).
//
// # Listing
//
// Client.List (dlock ls, dlock top) reads an index the tenant owns, the
// sorted set "<prefix>:index", with ZRANGE: no SCAN, which ignores key
// patterns and would show every tenant's key names. A client adds each lock
// it acquires (a member "m:", "r:" or "s:" and the name, for a Mutex or
// election, a read-write lock, a semaphore) with one ZADD, at most once per
// name every 30 minutes; List drops the members of locks that are free and
// were last added over an hour ago. The index thus holds one member per
// name locked since the last List (or within the last hour): a program that
// locks per request id and never lists grows it by one member per name, as
// it grows the ":token" counters. Locks held by clients older than the
// index are listed once they are taken again. The grant above covers it.
package redislock
