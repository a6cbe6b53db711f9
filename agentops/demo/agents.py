"""The demo agents: support returns, sales report, document batch (and its child worker).

By default a ScriptedModel drives them deterministically (agentops.demo.scripts). With
AGENTOPS_MODEL_BASE_URL and AGENTOPS_MODEL_NAME set, the same agents talk to that
OpenAI-compatible model instead, each plan step forcing its tool (agentops.demo.forced).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

from agentops.agents import Agent, StepSpec, registry
from agentops.demo import scripts
from agentops.demo import tools as t
from agentops.demo.forced import ForcedToolModel
from agentops.llm.protocol import ModelClient
from agentops.llm.scripted import ScriptedModel

VERSION = "1"


def real_model_configured() -> bool:
    """Return True when settings point the demo agents at a real model."""
    return bool(getattr(settings, "AGENTOPS_MODEL_BASE_URL", "")
                and getattr(settings, "AGENTOPS_MODEL_NAME", ""))


def model_factory(script: Callable[..., Any], step_tools: dict[str, str]) -> Callable[[], ModelClient]:
    """Return a factory: the real model when configured, else the scripted one."""

    def make() -> ModelClient:
        if real_model_configured():
            from agentops.llm.openai_compat import OpenAICompatClient

            return ForcedToolModel(OpenAICompatClient.from_settings(), step_tools)
        return ScriptedModel(script)

    return make


def _steps(step_tools: dict[str, str], titles: dict[str, str],
           rejectable: tuple[str, ...] = ()) -> list[StepSpec]:
    # Each step is done only when its tool succeeded; a step in ``rejectable`` may also end
    # with its tool rejected by a person (the run then completes with that exception).
    keys = list(step_tools)
    return [StepSpec(k, title=titles.get(k, k), depends_on=(keys[i - 1],) if i else (),
                     requires_tools=(step_tools[k],), allow_rejection=k in rejectable)
            for i, k in enumerate(keys)]


SUPPORT = registry.register(Agent(
    name="support-returns", version=VERSION,
    system_prompt=("You handle a customer's return. Work through the plan one step at a time, "
                   "calling the step's tool with the order from the input."),
    tools=[t.get_order, t.check_return_policy, t.track_logistics, t.issue_refund,
           t.create_return_label, t.send_customer_email],
    plan=_steps(scripts.SUPPORT_STEPS, {
        "order": "Look up the order", "policy": "Check the return policy",
        "track": "Confirm delivery with the carrier", "refund": "Refund the customer",
        "label": "Create the return label", "notify": "Email the customer"},
        rejectable=("refund",)),
    model=model_factory(scripts.support_returns, scripts.SUPPORT_STEPS),
))

SALES = registry.register(Agent(
    name="sales-report", version=VERSION,
    system_prompt="You write the quarterly sales report: query each region, then write it.",
    tools=[t.query_sales, t.write_report],
    plan=_steps(scripts.SALES_STEPS, {
        "sales_na": "Query North America", "sales_eu": "Query Europe",
        "sales_apac": "Query Asia-Pacific", "report": "Write the report"}),
    model=model_factory(scripts.sales_report, scripts.SALES_STEPS),
))

BATCH = registry.register(Agent(
    name="document-batch", version=VERSION,
    system_prompt="You extract invoice fields from a batch of documents using child runs.",
    tools=[t.list_documents, t.extract_in_children, t.summarize_batch],
    plan=_steps(scripts.BATCH_STEPS, {
        "list": "List the documents", "extract": "Extract fields in child runs",
        "report": "Check every document was extracted"}),
    model=model_factory(scripts.document_batch, scripts.BATCH_STEPS),
))

EXTRACT = registry.register(Agent(
    name="document-extract", version=VERSION,
    system_prompt=("You extract vendor and total from each invoice document: read them, "
                   "then save one record per document."),
    tools=[t.read_documents, t.save_fields],
    plan=[StepSpec("extract", title="Read and extract the batch",
                   requires_tools=("read_documents", "save_fields"))],
    model=model_factory(scripts.document_extract, scripts.EXTRACT_STEPS),
    max_turns_per_step=6,
))
