-- polylock check --permissions: which of the calls the lock scripts make this user may not
-- run. Every call is made with redis.pcall on the probe key KEYS[1], emptied before each call
-- and at the end, so nothing is left behind. ARGV[1]: 'keys' (return at once: the caller only
-- tests that the user may name KEYS[1]), 'plain' or 'sharded' (the cluster's pub/sub mode);
-- ARGV[2..]: channels to publish an empty message on (nobody listens on the probe's channels).
-- Returns the refused command names (`pubsub|numsub`) and `&<channel>` for refused channels.
-- RESTORE is optional (`acl::RESTORE_COMMANDS`): its payload here is no payload, which a user
-- who may run it gets a payload error for, and one who may not a refusal.
if ARGV[1] == 'keys' then
  return {}
end
local key = KEYS[1]
local channel = ARGV[2]
local function refused(reply)
  if type(reply) ~= 'table' or not reply.err then
    return false
  end
  local text = reply.err
  return string.find(text, "can't", 1, true) ~= nil or string.find(text, 'NOPERM', 1, true) ~= nil
    or string.find(text, 'ACL', 1, true) ~= nil or string.find(text, 'no permissions', 1, true) ~= nil
end
local calls = {
  {'decrby', 'decrby', key, 0}, {'del', 'del', key}, {'exists', 'exists', key},
  {'get', 'get', key}, {'hdel', 'hdel', key, 'f'}, {'hexists', 'hexists', key, 'f'},
  {'hget', 'hget', key, 'f'}, {'hgetall', 'hgetall', key}, {'hincrby', 'hincrby', key, 'f', 0},
  {'hkeys', 'hkeys', key}, {'hlen', 'hlen', key}, {'hset', 'hset', key, 'f', 'v'},
  {'incr', 'incr', key}, {'incrby', 'incrby', key, 0}, {'lindex', 'lindex', key, 0},
  {'lpop', 'lpop', key}, {'lpos', 'lpos', key, 'v'}, {'lpush', 'lpush', key, 'v'},
  {'lrange', 'lrange', key, 0, 0}, {'lrem', 'lrem', key, 0, 'v'}, {'mget', 'mget', key},
  {'pexpire', 'pexpire', key, 1000}, {'pttl', 'pttl', key}, {'rpush', 'rpush', key, 'v'},
  {'set', 'set', key, 'v'}, {'time', 'time'}, {'type', 'type', key},
  {'zadd', 'zadd', key, 0, 'm'}, {'zcard', 'zcard', key}, {'zcount', 'zcount', key, 0, 0},
  {'zincrby', 'zincrby', key, 0, 'm'}, {'zpopmin', 'zpopmin', key},
  {'zrange', 'zrange', key, 0, 0}, {'zrangebyscore', 'zrangebyscore', key, 0, 0},
  {'zrem', 'zrem', key, 'm'}, {'zremrangebyscore', 'zremrangebyscore', key, 0, 0},
  {'zscore', 'zscore', key, 'm'}, {'restore', 'restore', key, 0, 'not a payload'},
}
local publish, count = 'publish', {'pubsub|numsub', 'pubsub', 'numsub', channel}
if ARGV[1] == 'sharded' then
  publish, count = 'spublish', {'pubsub|shardnumsub', 'pubsub', 'shardnumsub', channel}
end
table.insert(calls, count)
local missing = {}
for _, call in ipairs(calls) do
  redis.pcall('del', key)
  if refused(redis.pcall(unpack(call, 2))) then
    table.insert(missing, call[1])
  end
end
redis.pcall('del', key)
for i = 2, #ARGV do
  local reply = redis.pcall(publish, ARGV[i], '')
  if refused(reply) then
    if string.find(reply.err, 'channel', 1, true) then
      table.insert(missing, '&' .. ARGV[i])
    elseif i == 2 then
      table.insert(missing, publish)
    end
  end
end
return missing
