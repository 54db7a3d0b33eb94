package redisnode

// The scripts of read-write locks and semaphores. They keep the mutex's
// fair queue and its handoff (see scripts.go): waiters queue in arrival
// order, a release hands what it freed to the waiters at the queue's head
// and tells each on its client's channel, the message only wakes the waiter
// (its next acquire script proves the grant), and every request carries an
// id that the hold it changed remembers, so a script run twice acts once.
//
// KEYS are those of Keys.all() for the kinds: the holds hash, the expiry
// set, the token counter, the queue and the queue info.
//
//   - holds hash "<prefix>:{<name>}:rw" (or ":sem"): one field per hold, the
//     kind's letter ("r" read, "w" write, "p" permit) and the owner id, whose
//     value is "count|token|requests|label" (requests: the ids of the last
//     requests that changed the hold, space-separated, oldest first); and,
//     for a semaphore, "\0n": the permit count its holders use.
//   - expiry set "…:exp": hold field -> expiry in ms of the server's clock.
//     Holds have leases of their own, and Redis 7.0 keeps no TTL per hash
//     field, so every script first drops the holds whose expiry has passed
//     (prune). Both keys get a PEXPIRE at least as long as their longest
//     lease, so a dead lock leaves nothing behind.
//   - token counter "…:token": one per read-write lock (both kinds) or
//     semaphore; every grant takes the next value.
//   - queue "…:queue" and queue info "…:queueinfo": request ->
//     "expiry|ttl|kind|limit|len(channel)|channel owner NUL label".
//
// A write hold is granted when no hold is live; a read hold when no write
// hold is live; a permit while fewer than the limit are live. A request not
// yet queued is granted only when nobody is queued: a waiting writer holds
// back the readers that come after it. The queue is served in order from
// its head for as long as the waiters there fit: every reader up to the
// first writer that must wait, a writer once nothing is held, permits while
// any is free.

// kindPrelude binds the keys, reads the server's clock and defines the
// helpers of every kind script.
const kindPrelude = `
if redis.replicate_commands then redis.replicate_commands() end
local hk, zk, tokk, q, qi = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local wttl, hcap = WAITER_TTL, HANDOFF_TTL
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
` + recent + `local function parse(rec) -- count, token, requests, label
  local c, tok, r, l = string.match(rec, '^(%d+)|(%d+)|([^|]*)|(.*)$')
  return tonumber(c), tok, r, l
end
local function record(c, tok, r, l)
  return c .. '|' .. tok .. '|' .. r .. '|' .. l
end
local function prune() -- drop the holds whose lease ran out
  local dead = redis.call('ZRANGEBYSCORE', zk, '-inf', now)
  if #dead > 0 then
    redis.call('HDEL', hk, unpack(dead))
    redis.call('ZREM', zk, unpack(dead))
  end
end
local function keep(ms) -- keep both keys at least ms longer
  if redis.call('PTTL', hk) < ms then redis.call('PEXPIRE', hk, ms) end
  if redis.call('PTTL', zk) < ms then redis.call('PEXPIRE', zk, ms) end
end
local function tidy() -- with no hold left, forget the limit too
  if redis.call('EXISTS', zk) == 0 then redis.call('DEL', hk) end
end
local function soonest() -- ms until the first live lease ends, or -1
  local s = redis.call('ZRANGE', zk, 0, 0, 'WITHSCORES')
  if #s == 0 then return -1 end
  return tonumber(s[2]) - now
end
local function fits(kind, limit) -- a new hold of kind can join the live ones
  local n = redis.call('ZCARD', zk)
  if n == 0 then return true end
  if kind == 'w' then return false end
  if kind == 'r' then -- a write hold is always alone
    return not (n == 1 and string.sub(redis.call('ZRANGE', zk, 0, 0)[1], 1, 1) == 'w')
  end
  return tonumber(redis.call('HGET', hk, '\0n') or '0') == limit and n < limit
end
-- grant gives id (kind letter and owner) a hold for request req, or one
-- more count on the hold it has, with a lease of at least ttl; returns the
-- hold's token and count, or nothing if a new hold's token would be at or
-- past TOKEN_LIMIT (or below 1: a counter set negative by hand).
local function grant(id, req, ttl, label, limit)
  local rec = redis.call('HGET', hk, id)
  local c, tok, r, l
  if rec then
    c, tok, r, l = parse(rec)
    c, r = c + 1, push(r, req)
  else
    local t = redis.call('INCR', tokk)
    if t < 1 or t >= TOKEN_LIMIT then return end
    -- the token as digits: record's '..' would write a number of 10^14
    -- or more as Lua's %.14g does ("1e+14"), which parse cannot read
    c, tok, r, l = 1, string.format('%d', t), req, label
  end
  redis.call('HSET', hk, id, record(c, tok, r, l))
  local cur = redis.call('ZSCORE', zk, id)
  if not cur or tonumber(cur) < now + ttl then redis.call('ZADD', zk, now + ttl, id) end
  if string.sub(id, 1, 1) == 'p' then redis.call('HSET', hk, '\0n', limit) end
  keep(ttl)
  return tonumber(tok), c
end
-- serve hands holds to the waiters at the queue's head, in order, for as
-- long as they fit, with a lease capped at hcap (a waiter that died just
-- now must not stall the queue for long), and tells each on the channel its
-- place names. Places that expired are dropped.
local function serve()
  while true do
    local head = redis.call('LINDEX', q, 0)
    if not head then return end
    local info = redis.call('HGET', qi, head)
    local exp, ttl, kind, limit, n, rest
    if info then
      exp, ttl, kind, limit, n, rest = string.match(info, '^(%d+)|(%d+)|(%a)|(%d+)|(%d+)|(.*)$')
    end
    if exp and tonumber(exp) > now then
      limit = tonumber(limit)
      if not fits(kind, limit) then return end
      n = tonumber(n)
      local ch, who = string.sub(rest, 1, n), string.sub(rest, n + 1)
      local owner, label = who, ''
      local z = string.find(who, '\0', 1, true)
      if z then owner, label = string.sub(who, 1, z - 1), string.sub(who, z + 1) end
      redis.call('LPOP', q)
      redis.call('HDEL', qi, head)
      local token = grant(kind .. owner, head, math.min(tonumber(ttl), hcap), label, limit)
      if not token then return end -- past TOKEN_LIMIT: the waiter's own acquire fails saying so
      redis.call('PUBLISH', ch, 'h' .. head .. ' ' .. token)
    else
      redis.call('LPOP', q)
      redis.call('HDEL', qi, head)
    end
  end
end
prune()
`

// kindAcquireScript: ARGV kind letter, owner, ttl ms, request id, channel
// (where a handoff to the request is announced; "" for a single attempt
// that does not queue), label, limit (a semaphore's permit count, else 0).
// Returns {1, token, holds, pttl} when the request holds, {0, 0, 0, ms
// until the first live lease ends or -1} when not, {-1, stored limit} when
// the semaphore's live holders use another limit.
var kindAcquireScript = newScript("kind_acquire", kindPrelude+`
local kind, owner, ttl, req, ch = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local label, limit = ARGV[6], tonumber(ARGV[7])
local id = kind .. owner
serve()
if kind == 'p' and redis.call('EXISTS', zk) == 1 then
  local stored = tonumber(redis.call('HGET', hk, '\0n') or '0')
  if stored ~= limit then return {-1, stored, 0, 0} end
end
local function dequeue()
  if ch ~= '' then
    redis.call('LREM', q, 0, req)
    redis.call('HDEL', qi, req)
  end
end
local rec = redis.call('HGET', hk, id)
if rec then
  local c, tok, r = parse(rec)
  if seen(r, req) then
    -- this request holds it: handed to it while it waited (the waiter's
    -- proof of a handoff, whose message may be old or lost), or granted by
    -- this same call run before. The holder takes its own TTL now (a
    -- handoff caps it), counted by the client from this call's send time.
    dequeue()
    if tonumber(redis.call('ZSCORE', zk, id)) < now + ttl then redis.call('ZADD', zk, now + ttl, id) end
    keep(ttl)
    return {1, tonumber(tok), c, tonumber(redis.call('ZSCORE', zk, id)) - now}
  end
  dequeue() -- re-entry
  local token, n = grant(id, req, ttl, label, limit)
  return {1, token, n, tonumber(redis.call('ZSCORE', zk, id)) - now}
end
if redis.call('EXISTS', q) == 0 and fits(kind, limit) then
  local token, n = grant(id, req, ttl, label, limit)
  if not token then error(PAST_LIMIT) end
  return {1, token, n, ttl}
end
if ch ~= '' then -- take or keep a place in the queue
  if redis.call('HEXISTS', qi, req) == 0 then redis.call('RPUSH', q, req) end
  redis.call('HSET', qi, req, (now + wttl) .. '|' .. ttl .. '|' .. kind .. '|' .. limit .. '|' .. #ch .. '|' .. ch .. owner .. '\0' .. label)
  redis.call('PEXPIRE', q, wttl * 2)
  redis.call('PEXPIRE', qi, wttl * 2)
end
return {0, 0, 0, soonest()}
`)

// kindReleaseScript: ARGV hold id, count, token, request id. Returns the
// holds left, -1 if the hold is not there with that token, or -2 as
// releaseScript does.
var kindReleaseScript = newScript("kind_release", kindPrelude+`
local id, req = ARGV[1], ARGV[4]
local rec = redis.call('HGET', hk, id)
if not rec then
  serve()
  tidy()
  return -1
end
local c, tok, r, l = parse(rec)
if tok ~= ARGV[3] then return -1 end
if seen(r, req) then return c end -- this release, run before
if forgotten(r, req) then return -2 end -- it may have run: see recent
c = c - tonumber(ARGV[2])
if c > 0 then
  redis.call('HSET', hk, id, record(c, tok, push(r, req), l))
  return c
end
redis.call('HDEL', hk, id)
redis.call('ZREM', zk, id)
serve()
tidy()
return 0
`)

// kindCancelScript: ARGV request id, hold id. Undoes an acquire request
// given up on, as cancelScript does for a mutex: it leaves the queue (which
// may let the readers behind a writer in), and a hold it changed loses the
// count it added. Returns 1 if it dropped a count.
var kindCancelScript = newScript("kind_cancel", kindPrelude+`
local req, id = ARGV[1], ARGV[2]
redis.call('LREM', q, 0, req)
redis.call('HDEL', qi, req)
local rec = redis.call('HGET', hk, id)
local dropped = 0
if rec then
  local c, tok, r, l = parse(rec)
  if seen(r, req) then
    dropped = 1
    if c > 1 then
      local ids = {}
      for x in string.gmatch(r, '%S+') do
        if x ~= req then ids[#ids + 1] = x end
      end
      redis.call('HSET', hk, id, record(c - 1, tok, table.concat(ids, ' '), l))
    else
      redis.call('HDEL', hk, id)
      redis.call('ZREM', zk, id)
    end
  end
end
serve()
tidy()
return dropped
`)

// kindRenewScript: KEYS holds hash, expiry set; ARGV hold id, token, ttl
// ms. Returns 1 if renewed, 0 if the hold is gone, has another token or its
// lease has run out. As renewScript, it never lowers a hold's expiry.
var kindRenewScript = newScript("kind_renew", `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = redis.call('HGET', KEYS[1], ARGV[1])
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not rec or not s or tonumber(s) <= now or string.match(rec, '^%d+|(%d+)|') ~= ARGV[2] then return 0 end
local ttl = tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], 'GT', now + ttl, ARGV[1]) -- never lowered (see renewScript)
for _, k in ipairs(KEYS) do
  if redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, ttl) end
end
return 1
`)

// kindForceScript: ARGV the tokens of the holds to drop (none: every
// hold). Drops those holds of the read-write lock or semaphore, whoever
// holds them, for an operator: the holders' next renewal finds its hold
// gone. The queue and the token counter stay, so the waiters at the
// queue's head are served now, in order, with tokens above every dropped
// one. Returns how many holds it dropped.
var kindForceScript = newScript("kind_force", kindPrelude+`
local n = 0
if #ARGV == 0 then
  n = redis.call('ZCARD', zk)
  redis.call('DEL', hk, zk)
else
  local want = {}
  for _, t in ipairs(ARGV) do want[t] = true end
  local all = redis.call('HGETALL', hk)
  for i = 1, #all, 2 do
    local id = all[i]
    if id ~= '\0n' then
      local _, tok = parse(all[i + 1])
      if tok and want[tok] then
        redis.call('HDEL', hk, id)
        redis.call('ZREM', zk, id)
        n = n + 1
      end
    end
  end
  tidy()
end
serve()
return n
`)
