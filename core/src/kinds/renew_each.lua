-- Watchdog renewal, batched: the start of every renewal script. KEYS = the holds' keys, ARGV[1]
-- the lease ms (0: only check), ARGV[i + 1] the member of KEYS[i] that is the hold (its owner,
-- or its permit id).
-- `renew_one(key, member)` says whether the hold is still there, and renews it unless only
-- checking. Replies one 1 (held) or 0 (gone) per key.
local function renew_each(renew_one)
  local held = {}
  for i, key in ipairs(KEYS) do
    held[i] = renew_one(key, ARGV[i + 1]) and 1 or 0
  end
  return held
end
