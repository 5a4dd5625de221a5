-- Semaphore: the permits available now. KEYS[1] permit counter.
return available(KEYS[1])
