"""Engine runtime: the worker tick, leases, commits, event appends, model and tool I/O, waits, recovery."""
