-- Expirable semaphore: the permits available now, after expired ones came back.
-- KEYS[1] permit counter, KEYS[2] permits' expiries, KEYS[3] channel.
reclaim(KEYS[1], KEYS[2], KEYS[3])
return available(KEYS[1])
