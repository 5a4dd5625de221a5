-- Test only (`the_scripts_name_the_waiter_list_as_keys_rs_does`): the names `line_keys`
-- derives from the lock's key KEYS[1].
local line = line_keys(KEYS[1])
return {line.waiters, line.reservation, line.told_prefix, line.listening, line.grants, line.latch_prefix}
