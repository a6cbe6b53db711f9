"""Control-flow signals: they pass through a tool author's ``except Exception``; only the engine catches them."""
from __future__ import annotations


class RunControl(BaseException):  # noqa: N818 - control-flow signal, not an error
    """Base of control-flow signals that must pass through a tool author's ``except Exception``."""


class LeaseLost(RunControl):
    """Another worker (or an operator) changed the run: stop at once, write nothing more."""


class RunCancelled(RunControl):
    """The run was cancelled: stop starting work; record what arrives late."""
