-- Semaphore: forget acquire requests whose caller has its permits.
-- KEYS their acquire latches (one slot: the name's hash tag). Replies how many were deleted.
return redis.call('del', unpack(KEYS))
