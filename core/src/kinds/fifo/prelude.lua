-- FIFO lock (polylock's own layout): the start of every FIFO script.
-- KEYS[1] the lock hash (the reentrant lock's: owner -> levels, plus the level fields), KEYS[2]
-- the line (a LIST of waiting owners, arrival order), KEYS[3] the prefix of the waiter records
-- (`<prefix>:<owner>`: a STRING whose TTL, the fair queue timeout renewed at every look, is the
-- waiter's liveness, holding its grant entry `<request>:<look>:<lease ms>`, or `<request>` when
-- it accepts no grant: either way it names the request whose look wrote it, which holds the
-- place), KEYS[4] the prefix of the waiters' channels (`<prefix>:<owner>`), KEYS[5] the prefix
-- of the acquire latches (tombstones); the last KEY (after the script's own) the plain lock's
-- channel `redisson_lock__channel:{name}`, shared by every kind whose lock is this hash.
-- No clock is read and nothing is walked: the line is only read at its head, and a waiter whose
-- record lapsed (it stopped looking) leaves the line when it reaches the head. An owner has at
-- most one entry in the line, so once served (or gone) it has none left to come back to.

local SHARED_CHANNEL = KEYS[#KEYS]

local function record_of(owner)
  return KEYS[3] .. ':' .. owner
end

-- The head of the line: the first owner whose record lives, with that record; the dead ahead
-- of it leave the line. Nil when nobody waits.
local function live_head()
  while true do
    local owner = redis.call('lindex', KEYS[2], '0')
    if not owner then
      return nil
    end
    local entry = redis.call('get', record_of(owner))
    if entry then
      return owner, entry
    end
    redis.call('lpop', KEYS[2])
  end
end

-- The head `owner` leaves the line to hold the lock.
local function head_leaves(owner)
  redis.call('lpop', KEYS[2])
  redis.call('del', record_of(owner))
end

-- Passes the free lock on to the head: granted in this script when the head accepts a grant and
-- listens (`grant`), else the head is told `0` and comes to take it (a lock left free is taken
-- only by the head). With nobody in line, `0` goes to the shared channel, as a plain release
-- sends it: the plain lock's waiters (polylock's and Redisson's RLock's) and the fair lock's
-- wait there for a lock of another kind on the name.
local function pass_on()
  local head, entry = live_head()
  if not head then
    publish(SHARED_CHANNEL, '0')
    return
  end
  if entry ~= '-' and grant(KEYS[1], KEYS[5], KEYS[4] .. ':' .. head, head, entry) then
    head_leaves(head)
    return
  end
  publish(KEYS[4] .. ':' .. head, '0')
end

-- `owner` stops waiting under `request`: its record goes, its entry leaves the line, and a free
-- lock passes on. Not when the record names another request: a later call of the same owner has
-- looked since and holds the place now (a late undo or leave must not take it away).
local function leave_line(owner, request)
  local entry = redis.call('get', record_of(owner))
  if entry and entry ~= request and not entry_of(entry, request) then
    return
  end
  redis.call('del', record_of(owner))
  redis.call('lrem', KEYS[2], '0', owner)
  if redis.call('exists', KEYS[1]) == 0 then
    pass_on()
  end
end
