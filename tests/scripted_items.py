"""Scripted-model items the engine tests share (agentops.llm.scripted holds the vocabulary)."""
from __future__ import annotations

from agentops.llm.protocol import ModelReply
from agentops.llm.scripted import Item


def fail_then(error: BaseException | ModelReply, reply: ModelReply, *, times: int = 1) -> Item:
    """Return an item that gives ``error`` for the first ``times`` attempts, then ``reply``."""
    return lambda ctx: error if ctx.attempt <= times else reply
