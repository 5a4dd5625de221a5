-- Reentrant lock: the uncontended acquire, ahead of the helpers (`lock_hash.lua`,
-- `waiters.lua`), which Lua defines anew at every run of a script: a free lock costs the
-- server a fifth less without them. KEYS and ARGV are `acquire.lua`'s.
-- None of the four keys exists (one call): the lock is free, kept for nobody, nobody waits,
-- and this request was not undone. The level is written at once (its field as `level_field`
-- names it), with its TTL (a hash cannot be created with one: HSET, then PEXPIRE).
if redis.call('exists', KEYS[1], KEYS[2], KEYS[3], KEYS[4]) == 0 then
  redis.call('hset', KEYS[1], ARGV[2], '1', LEVEL_FIELD_PREFIX .. ARGV[5], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
