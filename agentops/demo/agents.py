"""The demo agents: support returns, sales report, document batch (and its child worker).

By default a ScriptedModel drives them deterministically (agentops.demo.scripts). With a
model configured in settings (AGENTOPS_MODEL_*, see docs/sdk.md) the same agents talk to that
model instead; each plan step offers one tool, so AGENTOPS_MODEL_TOOL_CHOICE=required makes
even a small local model call it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentops.agents import Agent, StepSpec, registry
from agentops.demo import scripts
from agentops.demo import tools as t
from agentops.llm.configured import model_configured, model_from_settings
from agentops.llm.protocol import ModelClient
from agentops.llm.scripted import ScriptedModel

VERSION = "1"


def model_factory(script: Callable[..., Any]) -> Callable[[], ModelClient]:
    """Return a factory: the model the settings describe when there is one, else the script."""

    def make() -> ModelClient:
        return model_from_settings() if model_configured() else ScriptedModel(script)

    return make


def _steps(step_tools: dict[str, str], titles: dict[str, str],
           rejectable: tuple[str, ...] = ()) -> list[StepSpec]:
    # Each step is done only when its tool succeeded; a step in ``rejectable`` may also end
    # with its tool rejected by a person (the run then completes with that exception).
    keys = list(step_tools)
    return [StepSpec(k, title=titles.get(k, k), depends_on=(keys[i - 1],) if i else (),
                     tools=(step_tools[k],), requires_tools=(step_tools[k],),
                     allow_rejection=k in rejectable)
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
    model=model_factory(scripts.support_returns),
))

SALES = registry.register(Agent(
    name="sales-report", version=VERSION,
    system_prompt="You write the quarterly sales report: query each region, then write it.",
    tools=[t.query_sales, t.write_report],
    plan=_steps(scripts.SALES_STEPS, {
        "sales_na": "Query North America", "sales_eu": "Query Europe",
        "sales_apac": "Query Asia-Pacific", "report": "Write the report"}),
    model=model_factory(scripts.sales_report),
))

_BATCH_PROMPT = "You extract invoice fields from a batch of documents using child runs."
# Version 1 started every child run at once: kept so a batch of an earlier launch finishes.
registry.register(Agent(
    name="document-batch", version=VERSION, system_prompt=_BATCH_PROMPT,
    tools=[t.list_documents, t.extract_in_children, t.summarize_batch],
    plan=_steps({"list": "list_documents", "extract": "extract_in_children",
                 "report": "summarize_batch"}, {
        "list": "List the documents", "extract": "Extract fields in child runs",
        "report": "Check every document was extracted"}),
    model=model_factory(scripts.document_batch),
))
# Version 2 starts them in waves, a step each: its progress moves, and other runs (the
# demo's refunds) get a worker between waves instead of queueing behind every child.
BATCH = registry.register(Agent(
    name="document-batch", version="2", system_prompt=_BATCH_PROMPT,
    tools=[t.list_documents, t.extract_in_children, t.summarize_batch],
    plan=_steps(scripts.BATCH_STEPS, {
        "list": "List the documents", "report": "Check every document was extracted",
        **{f"extract_{k}": f"Extract fields in child runs, wave {k} of {scripts.BATCH_WAVES}"
           for k in range(1, scripts.BATCH_WAVES + 1)}}),
    model=model_factory(scripts.document_batch),
))

_EXTRACT_PROMPT = ("You extract vendor and total from each invoice document: read them, "
                   "then save one record per document.")
# Version 1 read the whole batch in one step: kept so a child started by an earlier launch
# still finishes.
registry.register(Agent(
    name="document-extract", version=VERSION, system_prompt=_EXTRACT_PROMPT,
    tools=[t.read_documents, t.save_fields],
    plan=[StepSpec("extract", title="Read and extract the batch",
                   requires_tools=("read_documents", "save_fields"))],
    model=model_factory(scripts.document_extract),
    max_turns_per_step=6,
))
# Version 2 reads the batch in parts, one step each, so an open child's progress moves.
EXTRACT = registry.register(Agent(
    name="document-extract", version="2", system_prompt=_EXTRACT_PROMPT,
    tools=[t.read_documents, t.save_fields],
    plan=_steps(scripts.EXTRACT_STEPS, {
        **{f"read_{k}": f"Read part {k} of {scripts.EXTRACT_PARTS}"
           for k in range(1, scripts.EXTRACT_PARTS + 1)},
        "save": "Save the fields found"}),
    model=model_factory(scripts.document_extract),
))
