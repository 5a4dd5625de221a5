-- Semaphore: take ARGV[2] permits if that many are available.
-- KEYS[1] permit counter, KEYS[2] acquire latch of this request.
-- ARGV[1] latch lifetime ms (every retry of the request comes within it), ARGV[2] permits.
-- Replies nil when taken (a retry of the request that took them replies nil again, taking
-- nothing but writing: its latch lives on from now, so a `WAIT` after the retry covers the
-- acquisition, see `sync_replicas`), -1 when too few are available (a release message tells
-- when to look again), UNDONE when the request was undone.
local latch = redis.call('get', KEYS[2])
if latch == '0' then
  return redis.status_reply('UNDONE')
end
if latch == '1' then
  redis.call('pexpire', KEYS[2], ARGV[1])
  return nil
end
local taken = take(KEYS[1], tonumber(ARGV[2]))
if taken ~= true then
  return taken or -1
end
redis.call('set', KEYS[2], '1', 'px', ARGV[1])
return nil
