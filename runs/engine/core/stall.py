"""Loop and stall guards: the same call again and again, or rounds without progress."""
from __future__ import annotations

LOOP_REPEATS = 3
STALL_ROUNDS = 5


def loop_evidence(recent_calls: list[str], new_hashes: list[str]) -> list[str] | None:
    """Return the repeating call hashes when a call repeats LOOP_REPEATS times, else None."""
    # Counted in C (list.count): this runs on every reply, with a handful of hashes.
    repeated = [h for h in new_hashes
                if h and recent_calls.count(h) + new_hashes.count(h) >= LOOP_REPEATS]
    return repeated or None
