-- Watchdog renewal of permits, batched.
-- KEYS = permits' expiry ZSETs; ARGV[1] lease ms (0: only check), ARGV[i + 1] the permit id
-- (hex) in KEYS[i]. A permit whose expiry has passed is lost, even before anyone reclaimed it.
-- Replies 1 (held, renewed) or 0 (gone) per key.
local held = {}
for i, key in ipairs(KEYS) do
  local id = permit_bytes(ARGV[i + 1])
  local expiry = redis.pcall('zscore', key, id)
  if type(expiry) == 'string' and tonumber(expiry) > now then
    if ARGV[1] ~= '0' then
      redis.call('zadd', key, 'xx', now + tonumber(ARGV[1]), id)
    end
    held[i] = 1
  else
    held[i] = 0
  end
end
return held
