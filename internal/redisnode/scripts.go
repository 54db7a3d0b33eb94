package redisnode

import (
	"time"
)

// Every step of the lock is one Lua script, so it is atomic and costs one
// round trip. KEYS are those of Keys.all(): lock, token, queue, queue info.
// Hash fields starting with NUL are the lock's own (owner ids cannot hold
// NUL): "\0t" the holder's token, "\0l" its label (Request.Label, set by
// the hold's first acquire, or carried in the queue by the waiter it was
// handed to; a re-entry keeps it), "\0r" the requests that last changed the
// hold (the acquires and releases that made it what it is, or the waiter it
// was handed to), the last recentRequests of them, space-separated, oldest
// first.
//
// Each acquire and release carries a request id of its own, and a script
// that finds its id in "\0r" has already run: it reports the hold as it is
// and changes nothing. go-redis sends a command again when its reply is lost
// with the connection (MaxRetries, 3 by default), and dlock sends a release
// again before the owner's next call when it failed uncertainly (see
// pendingRelease), so without this a release of one of two holds that ran
// twice would free the lock while a lease on it is still held. A list, not
// the last id alone: another process of the same owner may change the hold
// between the run and the retry.

// prelude binds the keys; recent defines the functions on a hold's list
// of requests, and helpers the slow paths' functions. Lua builds a
// script's local functions on every call, so the acquire's fast path
// builds one only, grant, which the slow path shares (a fix to the token
// choice is then made once), and returns before reaching the others.
//
// The acquire's fast path also keeps the server from formatting and
// parsing numbers: Redis 7.0 turns a number passed to redis.call into a
// string with snprintf's %.17g (glibc's multi-precision float printing),
// and tonumber parses with strtod. So the hold count and the TTL go as the
// strings they arrived as, and the token as string.format('%d') writes it
// (the digits %.17g wrote, for any token below 10^17). With seen's
// substring look and the functions out of that path, this cut the two
// scripts' own server time per Lock+Unlock from 8.8 to 8.0 µs (measured
// pipelined, 2026-11-26). It matters where client and server share cores:
// 16 goroutines on 16 names are bound by the CPU time both ends spend per
// Lock+Unlock (BenchmarkDistinct16 in redislock).
const prelude = `
local lock, tokk, q, qi = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local wttl, hcap = WAITER_TTL, HANDOFF_TTL
`

// recent: seen looks for the id as a substring first, which costs no new
// string, and only then for the id as a whole word of the list. (r is
// false, not nil, for a field HMGET did not find.)
//
// The list keeps the last RECENT ids, and before them, for each node whose
// ids were dropped from it, a mark "!" + the node's prefix + the highest
// count among its dropped ids (a request id is its node's prefix, ending in
// '.', and a count that grows with each request). forgotten tells from
// those marks whether an id the list does not hold may have been one of
// them: then a release cannot know whether it already ran (sent again by
// dlock after an uncertain failure, or by go-redis after a lost reply,
// while other processes of the owner changed the hold more than RECENT
// times), and is refused rather than run twice. A mark costs a word per
// node of the owner, and is written only when an id is dropped.
const recent = `
local function seen(r, id) -- whether request id is among the ids r lists
  return r and string.find(r, id, 1, true) and string.find(' ' .. r .. ' ', ' ' .. id .. ' ', 1, true) ~= nil
end
local function mark(marks, x) -- marks with dropped id x counted
  local p, n = string.match(x, '^(.+%.)(%d+)$')
  if not p then p, n = '', '0' end -- an id of no node: '!' alone, every id forgotten
  for i, m in ipairs(marks) do
    if string.sub(m, 2, #p + 1) == p and (p ~= '' or m == '!') then
      if p ~= '' and tonumber(string.sub(m, #p + 2)) < tonumber(n) then marks[i] = '!' .. p .. n end
      return
    end
  end
  marks[#marks + 1] = p == '' and '!' or '!' .. p .. n
end
local function push(r, id) -- r with id added, keeping the last RECENT and marking the dropped
  local ids, marks = {}, {}
  if r then for x in string.gmatch(r, '%S+') do
    if string.sub(x, 1, 1) == '!' then marks[#marks + 1] = x else ids[#ids + 1] = x end
  end end
  ids[#ids + 1] = id
  local from = math.max(1, #ids - RECENT + 1)
  for i = 1, from - 1 do mark(marks, ids[i]) end
  if #marks == 0 then return table.concat(ids, ' ') end
  return table.concat(marks, ' ') .. ' ' .. table.concat(ids, ' ', from)
end
local function forgotten(r, id) -- whether id, not listed in r, may have been dropped from it
  if not r or not string.find(r, '!', 1, true) then return false end
  if string.find(' ' .. r .. ' ', ' ! ', 1, true) then return true end
  local p, n = string.match(id, '^(.+%.)(%d+)$')
  if not p then return false end
  local i = string.find(r, '!' .. p, 1, true)
  local m = i and string.match(r, '^(%d+)', i + 1 + #p)
  return m ~= nil and tonumber(m) >= tonumber(n)
end
`

const helpers = `
if redis.replicate_commands then redis.replicate_commands() end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Hands the free lock to the first waiter whose place is still alive, with a
-- TTL capped at hcap so a waiter that died just now cannot stall the queue
-- for long, and tells it so on the channel its place names (its client's).
-- Every waiter has a place in the queue, so when no live place is left,
-- nobody waits and nothing is published.
local function handoff(now)
  while true do
    local head = redis.call('LPOP', q)
    if not head then break end
    local info = redis.call('HGET', qi, head)
    redis.call('HDEL', qi, head)
    if info then
      local exp, ttl, n, rest = string.match(info, '^(%d+)|(%d+)|(%d+)|(.*)$')
      n = tonumber(n)
      local ch, who = string.sub(rest, 1, n), string.sub(rest, n + 1)
      local owner, label = who, ''
      local z = string.find(who, '\0', 1, true) -- owner NUL label
      if z then owner, label = string.sub(who, 1, z - 1), string.sub(who, z + 1) end
      local t = tonumber(exp) > now and redis.call('INCR', tokk)
      if t and (t < 1 or t >= TOKEN_LIMIT) then return end -- grant refuses it too, with an error to the waiter
      if t then
        local token = string.format('%d', t) -- as grant writes it
        redis.call('HSET', lock, owner, 1, '\0t', token, '\0r', head, '\0l', label)
        redis.call('PEXPIRE', lock, math.min(tonumber(ttl), hcap))
        redis.call('PUBLISH', ch, 'h' .. head .. ' ' .. token)
        return
      end
    end
  end
end
`

// acquireScript: ARGV owner, ttl ms, request id, token ("" to take the next
// of the node's counter; else a token chosen by the caller, which raises the
// counter to it and is refused if the counter is already at or above it),
// channel (where a handoff to the request is announced; "" for a single
// attempt that does not queue), label (kept with a new hold, and with a
// queued request for the hold it may be handed).
// Returns the token of a new hold, the common case, or else {acquired,
// token, holds, pttl}.
var acquireScript = newScript("acquire", prelude+`
local owner, req, label = ARGV[1], ARGV[3], ARGV[6] or ''
-- grant makes owner the holder of the free lock for ARGV[2] ms and returns
-- its token: the next of the node's counter, or ARGV[4] if set, a token
-- chosen across nodes (Redlock), which raises the counter to it; nil,
-- granting nothing, if this token or a later one was already given out here.
local function grant()
  local token, t = ARGV[4], nil
  if token == nil or token == '' then
    t = redis.call('INCR', tokk)
    if t < 1 or t >= TOKEN_LIMIT then error(PAST_LIMIT) end
    token = string.format('%d', t)
  elseif tonumber(token) > tonumber(redis.call('GET', tokk) or '0') then
    redis.call('SET', tokk, token)
  else
    return nil
  end
  redis.call('HSET', lock, owner, '1', '\0t', token, '\0r', req, '\0l', label)
  redis.call('PEXPIRE', lock, ARGV[2])
  return t or tonumber(token)
end
if redis.call('EXISTS', lock, q) == 0 then -- free, nobody waiting: the common case
  return grant() or {0, 0, 0, redis.call('PTTL', lock)}
end
local ttl = tonumber(ARGV[2])
`+recent+helpers+`
local ch = ARGV[5]
local h = redis.call('HMGET', lock, '\0r', owner, '\0t')
if seen(h[1], req) then
  -- this request holds it: handed to it while it waited (the waiter's
  -- proof of a handoff, whose message may be old or lost), or granted by
  -- this same call run before. The holder takes its own TTL now (a handoff
  -- caps it), counted by the client from this call's send time.
  if ch ~= '' then -- a request granted is queued no more
    redis.call('LREM', q, 0, req)
    redis.call('HDEL', qi, req)
  end
  if redis.call('PTTL', lock) < ttl then redis.call('PEXPIRE', lock, ttl) end
  return {1, tonumber(h[3]), tonumber(h[2] or 1), redis.call('PTTL', lock)}
end
if h[2] then -- re-entry
  if ch ~= '' then
    redis.call('LREM', q, 0, req)
    redis.call('HDEL', qi, req)
  end
  local n = redis.call('HINCRBY', lock, owner, 1)
  redis.call('HSET', lock, '\0r', push(h[1], req))
  if redis.call('PTTL', lock) < ttl then redis.call('PEXPIRE', lock, ttl) end
  return {1, tonumber(h[3]), n, redis.call('PTTL', lock)}
end
local now = now_ms()
if redis.call('EXISTS', lock) == 0 then
  local head
  while true do -- drop waiters at the head whose place expired
    head = redis.call('LINDEX', q, 0)
    if not head then break end
    local info = redis.call('HGET', qi, head)
    if info and tonumber(string.match(info, '^(%d+)')) > now then break end
    redis.call('LPOP', q)
    redis.call('HDEL', qi, head)
  end
  if not head or (head == req and ch ~= '') then
    if head then
      redis.call('LPOP', q)
      redis.call('HDEL', qi, head)
    end
    local token = grant()
    if not token then return {0, 0, 0, redis.call('PTTL', lock)} end
    return {1, token, 1, ttl}
  end
  handoff(now) -- it is an earlier waiter's turn: give it the lock now
end
if ch ~= '' then -- take or keep a place in the queue
  if redis.call('HEXISTS', qi, req) == 0 then redis.call('RPUSH', q, req) end
  redis.call('HSET', qi, req, (now + wttl) .. '|' .. ttl .. '|' .. #ch .. '|' .. ch .. owner .. '\0' .. label)
  redis.call('PEXPIRE', q, wttl * 2)
  redis.call('PEXPIRE', qi, wttl * 2)
end
return {0, 0, 0, redis.call('PTTL', lock)}
`)

// releaseScript: ARGV owner, count, token, notify ("1": announce the release
// even with nobody queued, for waiters that do not queue: Redlock's),
// request id.
// Returns the holds left, -1 if owner does not hold the lock with token, or
// -2 for a request that may have run already: its id is not listed, but an
// id of its node at least as recent was dropped from the list (see recent).
// Running it again could release another process's hold of the same owner;
// the caller gives it up instead, and the hold keeps at most a count too
// many until it expires.
var releaseScript = newScript("release", prelude+recent+`
local h = redis.call('HMGET', lock, ARGV[1], '\0t', '\0r')
local n = h[1]
if not n or h[2] ~= ARGV[3] then return -1 end
if seen(h[3], ARGV[5]) then return tonumber(n) end -- this release, run before
if forgotten(h[3], ARGV[5]) then return -2 end -- it may have run: see recent
n = tonumber(n) - tonumber(ARGV[2])
if n > 0 then
  redis.call('HSET', lock, ARGV[1], n, '\0r', push(h[3], ARGV[5]))
  return n
end
redis.call('DEL', lock)
if redis.call('EXISTS', q) == 0 then -- nobody queued
  if ARGV[4] == '1' then redis.call('PUBLISH', lock .. ':released', 'r') end
  return 0
end
`+helpers+`
handoff(now_ms())
return 0
`)

// renewScript: KEYS lock; ARGV owner, token, ttl ms. Returns 1 if renewed,
// 0 if the lock is gone or belongs to another hold. It never lowers the
// lock's expiry: a hold counted more than once may be shared with another
// process of the owner, whose lease counts on the expiry its own renewals
// set (and a renewal in flight may land after the release of the hold it
// renews). A shorter Extend moves only its lease's own expiry.
var renewScript = newScript("renew", `
local h = redis.call('HMGET', KEYS[1], ARGV[1], '\0t')
if h[1] and h[2] == ARGV[2] then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
  return 1
end
return 0
`)

// cancelScript: ARGV request, owner, notify ("1": announce a freed lock
// even with nobody queued, for waiters that do not queue: Redlock's, as
// releaseScript does). Undoes an acquire request given up on (its waiter
// stopped, or its reply was lost): removes it from the queue, and if it
// changed the hold (the lock was handed to it, or it granted or re-entered
// it), drops the one hold it made: the lock, passed on to the next waiter,
// if it is the owner's only one. It then takes its id out of the hold's
// list, so a cancel run twice acts once. Returns 1 if it dropped a hold.
var cancelScript = newScript("cancel", prelude+recent+helpers+`
local req, owner = ARGV[1], ARGV[2]
redis.call('LREM', q, 0, req)
redis.call('HDEL', qi, req)
local h = redis.call('HMGET', lock, '\0r', owner)
if not seen(h[1], req) then return 0 end
local n = tonumber(h[2] or 0)
if n > 1 then -- the owner's other holds stay
  local ids = {}
  for x in string.gmatch(h[1], '%S+') do
    if x ~= req then ids[#ids + 1] = x end
  end
  redis.call('HSET', lock, owner, n - 1, '\0r', table.concat(ids, ' '))
  return 1
end
redis.call('DEL', lock)
if redis.call('EXISTS', q) == 0 then -- nobody queued
  if ARGV[3] == '1' then redis.call('PUBLISH', lock .. ':released', 'r') end
  return 1
end
handoff(now_ms())
return 1
`)

// forceScript: ARGV token ("": any). Deletes the lock whoever holds it, or
// only while its holder's token is token, and hands it to the next waiter.
var forceScript = newScript("force", prelude+recent+helpers+`
if ARGV[1] ~= '' and redis.call('HGET', lock, '\0t') ~= ARGV[1] then return 0 end
if redis.call('DEL', lock) == 0 then return 0 end
handoff(now_ms())
return 1
`)

// TokenLimit bounds the tokens the scripts give out: Redis's Lua holds
// numbers as doubles, which count every integer up to 2^53 and no further
// (2^53 + 1 reads as 2^53), so a counter past it would give a holder the
// token of the one before. A counter gets there only when set by hand; an
// acquire then fails with an error saying so (pastLimit), rather than
// break the fencing tokens' order. So it does below 1 (a counter set
// negative), whose tokens the client would read as uint64s near 2^64.
const TokenLimit = 1 << 53

// pastLimit is the error of a script that would give out a token below 1
// or at or above TokenLimit.
const pastLimit = "dlock: the token counter is negative or at or past 2^53, beyond which Redis's Lua cannot count exactly"

// recentRequests is how many of the requests that last changed a hold it
// lists: more than a reply can be late by, in changes of its owner's holds.
const recentRequests = 16

func ms(d time.Duration) int64 { return d.Milliseconds() }
