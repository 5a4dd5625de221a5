-- Inspect: one read-only snapshot of whatever polylock and Redisson keep under a name.
-- KEYS[1] the name, [2] fair queue, [3] fair deadlines, [4] fair liveness records,
-- [5] fenced token counter, [6] read-write waiting writers, [7] expirable permits' expiries,
-- [8] FIFO line, [9] the prefix of the FIFO waiter records, [10] an election's record,
-- [11] polylock's latch mark.
-- Writes nothing. Replies {server time ms, TYPE of the name, PTTL of the name, contents of the
-- name (HGETALL of a hash, {value} of a string, else {}), then for KEYS[2..8] each {TYPE,
-- contents}: LRANGE of a list, ZRANGE WITHSCORES of a zset, {value} of a string, else {};
-- then the PTTL of each FIFO line entry's record, in line order; then {TYPE, contents} of
-- KEYS[10] and of KEYS[11]}.
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local function read(key)
  local kind = redis.call('type', key)['ok']
  if kind == 'hash' then
    return kind, redis.call('hgetall', key)
  elseif kind == 'string' then
    return kind, { redis.call('get', key) }
  elseif kind == 'list' then
    return kind, redis.call('lrange', key, '0', '-1')
  elseif kind == 'zset' then
    return kind, redis.call('zrange', key, '0', '-1', 'withscores')
  end
  return kind, {}
end

local kind, contents = read(KEYS[1])
local reply = { now, kind, redis.call('pttl', KEYS[1]), contents }
local line
for i = 2, 8 do
  local aux_kind, aux = read(KEYS[i])
  reply[#reply + 1] = { aux_kind, aux }
  if i == 8 and aux_kind == 'list' then
    line = aux
  end
end
local records = {}
for _, owner in ipairs(line or {}) do
  records[#records + 1] = redis.call('pttl', KEYS[9] .. ':' .. owner)
end
reply[#reply + 1] = records
for i = 10, 11 do
  local aux_kind, aux = read(KEYS[i])
  reply[#reply + 1] = { aux_kind, aux }
end
return reply
