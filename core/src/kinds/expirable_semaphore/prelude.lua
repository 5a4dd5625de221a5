-- Expirable semaphore (Redisson RPermitExpirableSemaphore): the start of every script.
-- The name is a STRING of available permits, as the semaphore's; the ZSET `{name}:timeout`
-- holds each acquired permit (its id, 16 raw bytes) with its expiry (epoch ms). Times are the
-- server's clock (Redisson's clients write their own; both are epoch ms). The semaphore's
-- prelude comes first (`available`).
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

-- Redisson's expiry of a permit that never expires.
local NEVER = 922337203685477

-- A permit id as Redisson keeps it: 16 raw bytes; clients give 32 hex characters.
local function permit_bytes(hex)
  return (string.gsub(hex, '..', function(pair)
    return string.char(tonumber(pair, 16))
  end))
end

-- Permits whose lease ran out come back, and waiters hear of them.
local function reclaim(counter, timeouts, channel)
  local expired = redis.call('zrangebyscore', timeouts, '0', now, 'limit', '0', '1000')
  if #expired > 0 then
    redis.call('zrem', timeouts, unpack(expired))
    local value = redis.call('incrby', counter, #expired)
    if value > 0 then
      publish(channel, value)
    end
  end
end
