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

BATCH = registry.register(Agent(
    name="document-batch", version=VERSION,
    system_prompt="You extract invoice fields from a batch of documents using child runs.",
    tools=[t.list_documents, t.extract_in_children, t.summarize_batch],
    plan=_steps(scripts.BATCH_STEPS, {
        "list": "List the documents", "extract": "Extract fields in child runs",
        "report": "Check every document was extracted"}),
    model=model_factory(scripts.document_batch),
))

EXTRACT = registry.register(Agent(
    name="document-extract", version=VERSION,
    system_prompt=("You extract vendor and total from each invoice document: read them, "
                   "then save one record per document."),
    tools=[t.read_documents, t.save_fields],
    plan=[StepSpec("extract", title="Read and extract the batch",
                   requires_tools=("read_documents", "save_fields"))],
    model=model_factory(scripts.document_extract),
    max_turns_per_step=6,
))
