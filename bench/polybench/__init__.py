"""The benchmark driver behind bench/run.py, one module per concept.

paths        where the driver, the workers and the build outputs are
server       the throwaway redis-server and the MONITOR command counter
machine      the machine: load, CPU steal and others' CPU around a run; its description
peers        the contenders of each scenario and how each language's worker is started
workers      worker processes (spawned, or pooled warm JVMs) and one timed run of them
measure      what the scenarios share: the hold, percentiles, Jain, rounds and their medians
uncontended  U, contended C, many_locks M, renewal R, read_write RW, semaphore S
report       RESULTS.md; targets its targets table; plots its PNGs
smoke        the smoke run's checks
"""
