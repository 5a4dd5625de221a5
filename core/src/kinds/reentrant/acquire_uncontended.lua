-- Reentrant lock: the uncontended acquire, ahead of the helpers (`lock_hash.lua`,
-- `waiters.lua`), which Lua defines anew at every run of a script: a free lock costs the
-- server a fifth less without them. KEYS and ARGV are `acquire.lua`'s, and ARGV[6] the new
-- lock hash as a DUMP payload (`restore.rs`), or '' once the server refused RESTORE.
-- None of the four keys exists (one call): the lock is free, kept for nobody, nobody waits,
-- and this request was not undone. The level is written at once (its field as `level_field`
-- names it), with its TTL: in one call by RESTORE, else by HSET and PEXPIRE, replying
-- WRITTEN_WITHOUT_RESTORE when RESTORE was tried and refused (the client then stops sending
-- payloads). RESTORE is tried only when redis.acl_check_cmd (Redis 7.0+, Valkey) says the user
-- may run it, which leaves no refusal in ACL LOG (Redis 6.2, without it, tries).
if redis.call('exists', KEYS[1], KEYS[2], KEYS[3], KEYS[4]) == 0 then
  if ARGV[6] ~= '' and (not redis.acl_check_cmd
      or select(2, pcall(redis.acl_check_cmd, 'restore', KEYS[1], ARGV[1], ARGV[6])) == true)
      and not redis.pcall('restore', KEYS[1], ARGV[1], ARGV[6]).err then
    return nil
  end
  redis.call('hset', KEYS[1], ARGV[2], 1, LEVEL_FIELD_PREFIX .. ARGV[5], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if ARGV[6] ~= '' then
    return redis.status_reply('WRITTEN_WITHOUT_RESTORE')
  end
  return nil
end
