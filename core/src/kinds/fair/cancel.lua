-- Fair lock: a waiter gives up. ARGV[1] owner, ARGV[2] wait allowance W ms.
leave_queue(ARGV[1], tonumber(ARGV[2]))
return 0
