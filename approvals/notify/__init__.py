"""Reaching people where they are: channels, routing rules, the outbox, SLA clocks, the sender."""
