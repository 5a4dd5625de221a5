-- Watchdog renewal of hash-based locks, batched.
-- KEYS = lock hashes; ARGV[1] lease ms (0: only check), ARGV[i + 1] the owner of KEYS[i].
-- Replies one 1 (held, renewed) or 0 (gone: expired, deleted, taken, or not a lock) per key.
-- pcall, so that one key of the wrong type does not fail the whole batch.
local held = {}
for i, key in ipairs(KEYS) do
  if redis.pcall('hexists', key, ARGV[i + 1]) == 1 then
    if ARGV[1] ~= '0' then
      redis.call('pexpire', key, ARGV[1])
    end
    held[i] = 1
  else
    held[i] = 0
  end
end
return held
