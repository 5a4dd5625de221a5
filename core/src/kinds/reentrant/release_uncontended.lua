-- Reentrant lock: the uncontended release, ahead of the helpers (`lock_hash.lua`,
-- `waiters.lua`), which Lua defines anew at every run of a script. KEYS and ARGV are
-- `release.lua`'s, which goes on from the three values read here when this is not the case:
-- the owner's last level, this request's, and no waiters mark. The hash becomes the release trace, and `0` goes to the
-- lock channel, as `release_level` and `release.lua` do (the trace lives ARGV[4] ms).
local levels, mine, waiting = unpack(redis.call('hmget', KEYS[1], ARGV[2], LEVEL_FIELD_PREFIX .. ARGV[3], WAITERS_MARK))
if mine and levels == '1' and not waiting then
  redis.call('rename', KEYS[1], KEYS[3])
  redis.call('pexpire', KEYS[3], ARGV[4])
  publish(KEYS[2], '0')
  return 1
end
