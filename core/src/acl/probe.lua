-- polylock check --permissions: which of the commands the lock scripts call this user may not
-- run. Every call is made with redis.pcall on the probe key KEYS[1], emptied before each call
-- and at the end, so nothing is left behind. ARGV[1]: 'keys' (return at once: the caller only
-- tests that the user may name KEYS[1]), 'plain' or 'sharded' (the cluster's pub/sub mode);
-- ARGV[2]: n, the number of commands; ARGV[3 .. n+2]: the commands, as the rule names them
-- (`hset`, `pubsub|numsub`); the rest: channels to publish an empty message on (nobody listens
-- on the probe's channels).
-- A command is called with the probe key as its every argument, with 0, 1, 2 ... of them until
-- the server takes the number of arguments (Redis checks it before the user's rule): its
-- reply then says whether the rule lets the user run it (a wrong type or value is no refusal).
-- Returns the refused commands and `&<channel>` for refused channels.
if ARGV[1] == 'keys' then
  return {}
end
local key = KEYS[1]
local count = tonumber(ARGV[2])
local function refused(reply)
  if type(reply) ~= 'table' or not reply.err then
    return false
  end
  local text = string.lower(reply.err)
  return string.find(text, "can't run", 1, true) ~= nil
    or string.find(text, 'permissions to run', 1, true) ~= nil
end
local function channel_refused(reply)
  if type(reply) ~= 'table' or not reply.err then
    return false
  end
  local text = string.lower(reply.err)
  return string.find(text, 'channel', 1, true) ~= nil
    and (string.find(text, "can't", 1, true) ~= nil or string.find(text, 'noperm', 1, true) ~= nil
      or string.find(text, 'no permissions', 1, true) ~= nil)
end
local function wrong_arity(reply)
  return type(reply) == 'table' and reply.err ~= nil
    and string.find(string.lower(reply.err), 'number of arg', 1, true) ~= nil
end
local missing = {}
for i = 3, count + 2 do
  local command = ARGV[i]
  local call = {}
  for word in string.gmatch(command, '[^|]+') do
    table.insert(call, word)
  end
  for _ = 0, 6 do
    redis.pcall('del', key)
    local reply = redis.pcall(unpack(call))
    if not wrong_arity(reply) then
      if refused(reply) then
        table.insert(missing, command)
      end
      break
    end
    table.insert(call, key)
  end
end
redis.pcall('del', key)
local publish = 'publish'
if ARGV[1] == 'sharded' then
  publish = 'spublish'
end
for i = count + 3, #ARGV do
  local reply = redis.pcall(publish, ARGV[i], '')
  if channel_refused(reply) then
    table.insert(missing, '&' .. ARGV[i])
  elseif refused(reply) and i == count + 3 then
    table.insert(missing, publish)
  end
end
return missing
