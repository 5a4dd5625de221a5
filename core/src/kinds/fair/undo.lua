-- Fair lock: undo an acquire request whose reply was lost, or whose acquisition the replicas
-- did not confirm. KEYS[8] its tombstone.
-- ARGV[1] owner, ARGV[2] tombstone lifetime ms, ARGV[3] TTL to restore when the owner keeps other
-- levels (0: leave it), ARGV[4] wait allowance W ms, ARGV[5] the request under which the owner
-- tries again at once and keeps its place at the head ('' when it does not), ARGV[6] queue
-- timeout ms, ARGV[7] the request undone.
-- Releases the level if the request acquired (by its own script or a release's grant), else
-- leaves the queue if the place is still the request's (`leave_queue`); either way the request
-- gets a tombstone so that it, should it still arrive or be granted the lock, does nothing. An
-- owner that tries again and whose undone acquisition freed the lock takes the head of the
-- queue back (it was first in line).
local undone = 0
local allowance = tonumber(ARGV[4])
local field = level_field(ARGV[7])
if redis.call('hexists', KEYS[1], field) == 1 then
  undone = 1
  if take_level_off(KEYS[1], ARGV[1], field, ARGV[3]) then
    if ARGV[5] ~= '' then
      rejoin_at_head(ARGV[1], allowance, tonumber(ARGV[6]), ARGV[5])
    end
    pass_on(allowance)
  end
elseif ARGV[5] == '' then
  leave_queue(ARGV[1], allowance, ARGV[7])
end
redis.call('set', KEYS[8], '0', 'px', ARGV[2])
return undone
