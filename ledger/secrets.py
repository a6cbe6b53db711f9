"""The secrets a run knows: its tool calls' sealed (sensitive) arguments plus configured ones."""
from __future__ import annotations

import logging
from typing import Any

from agentops.redaction import Secrets, configured_secrets, remember
from ledger.errors import SealedUnreadable
from ledger.models import ToolCall
from ledger.sealed import unseal

logger = logging.getLogger(__name__)


def run_secrets(run_id: Any) -> Secrets:
    """Return every secret of run ``run_id`` (one query over its sealed calls).

    Unordered: the model's default order (the run's ``updated_at``, then the call's turn)
    would join the run table for nothing, once a tick."""
    tokens = (ToolCall.objects.filter(run_id=run_id).exclude(sealed_args="").order_by()
              .values_list("tool_call_id", "sealed_args"))
    return configured_secrets() | _opened(tokens)


def _opened(tokens: Any) -> Secrets:
    values: list[Any] = []
    for call_id, token in tokens:
        try:
            values.extend(unseal(token).values())
        except SealedUnreadable:
            logger.warning("sealed arguments of %s cannot be opened; they are not scrubbed "
                           "by value until the seal key is restored", call_id)
    secrets = Secrets.of(values)
    remember(secrets)
    return secrets
