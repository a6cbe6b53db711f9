"""Engine core: pure functions of state (reducer, policy, context, completion, stall, offer); no I/O."""
