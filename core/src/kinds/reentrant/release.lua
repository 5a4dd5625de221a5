-- Reentrant lock: release one level.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] the owner's release trace of this lock (the
-- waiter list's keys derive from KEYS[1]: `line_keys`).
-- ARGV[1] lease ms (the TTL when levels remain), ARGV[2] owner, ARGV[3] the acquire request of
-- the level released, ARGV[4] how long the release trace lives (`release_level`).
-- Replies nil (not held by the owner), 0 (still held), 1 (released); a retry or a late copy
-- of a release that went through finds the level's field gone and replays its answer
-- (`released_before`).
-- `levels`, `mine`, `waiting`: read by `release_uncontended.lua`, which runs first.
if not mine then
  return released_before(levels, KEYS[3], level_field(ARGV[3]))
end
if not release_level(KEYS[1], ARGV[2], levels, ARGV[1], level_field(ARGV[3]), KEYS[3], ARGV[4]) then
  return 0
end
if waiting then
  local line = line_keys(KEYS[1])
  redis.call('del', line.reservation)
  tell_next(line, KEYS[1], KEYS[2])
else
  -- Nobody is listed: only a client other than polylock (or none) listens on the shared channel.
  publish(KEYS[2], '0')
end
return 1
