-- Fair lock: release one level. KEYS[8] the owner's release trace of this lock.
-- ARGV[1] lease ms (the TTL when levels remain), ARGV[2] owner, ARGV[3] the acquire request
-- of the level released, ARGV[4] wait allowance W ms, ARGV[5] how long the release trace
-- lives (`release_level`).
-- Replies nil (not held), 0 (still held), 1 (released); a retry or a late copy of a release
-- that went through finds the level's field gone and replays its answer (`released_before`).
-- Only the head of the queue is told (or granted the lock), on its own channel. When the key is
-- already gone the lock passes to the head all the same (it is free) and the caller learns it
-- did not hold it.
local field = level_field(ARGV[3])
local levels, mine = unpack(redis.call('hmget', KEYS[1], ARGV[2], field))
if not mine then
  local answer = released_before(levels, KEYS[8], field)
  if not levels and redis.call('exists', KEYS[1]) == 0 then
    pass_on(tonumber(ARGV[4]))
  end
  return answer
end
if release_level(KEYS[1], ARGV[2], levels, ARGV[1], field, KEYS[8], ARGV[5]) then
  pass_on(tonumber(ARGV[4]))
  return 1
end
return 0
