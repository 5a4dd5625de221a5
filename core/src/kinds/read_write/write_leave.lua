-- Write lock: a waiting writer that gives up leaves polylock's writers ZSET, and new readers
-- may enter again at once.
-- KEYS[1] polylock's waiting writers, KEYS[2] channel; ARGV[1] the writer's field.
if redis.call('zrem', KEYS[1], ARGV[1]) == 1 then
  redis.call('publish', KEYS[2], 1)
  return 1
end
return 0
