-- FIFO lock: undo an acquire request whose reply was lost, or whose acquisition the replicas
-- did not confirm. KEYS[6] its tombstone.
-- ARGV[1] owner, ARGV[2] tombstone lifetime ms, ARGV[3] TTL to restore when the owner keeps
-- other levels (0: leave it), ARGV[4] the request under which the owner tries again at once and
-- keeps its place at the head ('' when it does not), ARGV[5] queue timeout ms, ARGV[6] the
-- request undone.
-- Releases the level if the request acquired (by its own script or a release's grant), else
-- leaves the line if the place is still the request's (`leave_line`); either way the request
-- gets a tombstone so that it, should it still arrive or be granted the lock, does nothing.
-- Replies 1 when a level was undone.
local undone = 0
local field = level_field(ARGV[6])
if redis.call('hexists', KEYS[1], field) == 1 then
  undone = 1
  if take_level_off(KEYS[1], ARGV[1], field, ARGV[3]) then
    if ARGV[4] ~= '' then
      -- First in line again: its next look, at once, takes the lock. The place is the next
      -- request's, so an undo of that one removes it.
      redis.call('lrem', KEYS[2], '0', ARGV[1])
      redis.call('lpush', KEYS[2], ARGV[1])
      redis.call('set', record_of(ARGV[1]), ARGV[4], 'px', ARGV[5])
    end
    pass_on()
  end
elseif ARGV[4] == '' then
  leave_line(ARGV[1], ARGV[6])
end
redis.call('set', KEYS[6], '0', 'px', ARGV[2])
return undone
