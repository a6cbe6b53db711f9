"""The scripted model's answers for the demo agents: deterministic, read from the run's input.

Each script is a function of the ScriptContext (step, turn, pinned input, the tool results
in the context), so the same run gets the same answers after a crash or a retry. Model
faults come from the input's ``faults.model``: ``repeat_tracking`` (the model keeps asking
the carrier, a loop) and ``outage:N`` (the provider fails N calls with HTTP 503).
"""
from __future__ import annotations

import json
from typing import Any

from agentops.demo import world
from agentops.llm.protocol import ModelReply, ServerError
from agentops.llm.scripted import ScriptContext, call, say


def _model_fault(ctx: ScriptContext) -> tuple[str, str]:
    faults = ctx.input.get("faults") or {}
    kind, _, arg = str(faults.get("model", "")).partition(":")
    return kind, arg


def _facts(ctx: ScriptContext) -> list[dict[str, Any]]:
    """Return the facts of every tool result in the context, oldest first."""
    out = []
    for msg in ctx.messages:
        if msg.get("role") == "tool":
            facts = json.loads(msg["content"]).get("facts")
            if isinstance(facts, dict):
                out.append(facts)
    return out


SUPPORT_STEPS = {"order": "get_order", "policy": "check_return_policy",
                 "track": "track_logistics", "refund": "issue_refund",
                 "label": "create_return_label", "notify": "send_customer_email"}


def refund_outcome(ctx: ScriptContext) -> str:
    """Return "" when the refund went through, else why not (rejected, or the step skipped)."""
    ids = {c["id"] for m in ctx.messages if m.get("role") == "assistant"
           for c in m.get("tool_calls") or () if c["function"]["name"] == "issue_refund"}
    for msg in ctx.messages:
        if msg.get("role") == "tool" and msg.get("tool_call_id") in ids:
            body = json.loads(msg["content"])
            if body.get("status") in ("succeeded", "confirmed_executed"):
                return ""
            if body.get("status") == "rejected":
                return (body.get("error") or {}).get("message", "rejected")
    progress = next((m["content"] for m in ctx.messages
                     if m.get("content", "").startswith("## Progress")), "")
    if "[-] refund:" in progress:
        return "the refund step was skipped"
    return ""


def support_returns(ctx: ScriptContext) -> ModelReply:
    """Answer the support-returns agent: one tool call per step, then a short note.

    A refund a person rejected is not retried and never announced: the refund step ends
    saying so, and the customer's email says the refund was not made.
    """
    order_id = str(ctx.input.get("order_id", "A-1001"))
    looping = ctx.step == "track" and _model_fault(ctx)[0] == "repeat_tracking"
    if ctx.turn > 1 and not looping:
        not_refunded = refund_outcome(ctx) if ctx.step == "refund" else ""
        if not_refunded:
            return say(f"refund not made for {order_id}: {not_refunded}")
        return say(f"{ctx.step} done for {order_id}")
    order = ctx.fact("item") and {"amount": ctx.fact("amount"), "email": ctx.fact("email")}
    order = order or world.order_get(order_id)
    args: dict[str, Any] = {"order_id": order_id}
    if ctx.step == "refund":
        args["amount"] = order["amount"]
    if ctx.step == "notify":
        not_refunded = refund_outcome(ctx)
        body = (f"We refunded {order['amount']} EUR; your return label is attached."
                if not not_refunded else
                "We could not refund your order; a colleague will contact you. Your return "
                "label is attached.")
        args = {"to": order["email"], "subject": f"Your return of {order_id}", "body": body}
    return call(SUPPORT_STEPS[ctx.step], **args)


SALES_STEPS = {f"sales_{r}": "query_sales" for r in ("na", "eu", "apac")} | {"report": "write_report"}


def sales_report(ctx: ScriptContext) -> ModelReply:
    """Answer the sales-report agent: query each region, then write the report."""
    if ctx.turn > 1:
        return say(f"{ctx.step} done")
    if ctx.step.startswith("sales_"):
        return call("query_sales", region=ctx.step.removeprefix("sales_"))
    totals = {f["region"]: f["total"] for f in _facts(ctx) if "region" in f and "total" in f}
    return call("write_report", title=str(ctx.input.get("title", "Quarterly sales")),
                totals=totals)


BATCH_WAVES = 4
BATCH_STEPS = {"list": "list_documents"} | {
    f"extract_{k}": "extract_in_children" for k in range(1, BATCH_WAVES + 1)} | {
    "report": "summarize_batch"}


def document_batch(ctx: ScriptContext) -> ModelReply:
    """Answer the document-batch agent: list, fan out to child runs (a wave per step in
    version 2; all at once in version 1's one ``extract`` step), check the count."""
    count = int(ctx.input.get("documents", 240))
    if ctx.turn > 1:
        return say(f"{ctx.step} done")
    if ctx.step.startswith("extract"):
        wave = int(ctx.step.removeprefix("extract_") or 0) if ctx.step != "extract" else 0
        waves = {"wave": wave, "waves": BATCH_WAVES} if wave else {}
        return call("extract_in_children", count=count,
                    batch_size=int(ctx.input.get("batch_size", 20)), **waves)
    return call("list_documents" if ctx.step == "list" else "summarize_batch", count=count)


EXTRACT_PARTS = 4
EXTRACT_STEPS = {f"read_{k}": "read_documents" for k in range(1, EXTRACT_PARTS + 1)} | {
    "save": "save_fields"}


def extract_part(doc_ids: list[str], part: int) -> list[str]:
    """Return part ``part`` (1-based) of EXTRACT_PARTS nearly equal slices of ``doc_ids``."""
    size = -(-len(doc_ids) // EXTRACT_PARTS)
    return doc_ids[(part - 1) * size:part * size]


def document_extract(ctx: ScriptContext) -> ModelReply | BaseException:
    """Answer a batch's child run: read the documents (a part per step in version 2; all at
    once in version 1's one ``extract`` step), then save the fields found in them."""
    doc_ids = list(ctx.input.get("doc_ids") or [])
    reading = ctx.step.startswith("read_") or (ctx.step == "extract" and ctx.turn == 1)
    saving = ctx.step == "save" or ctx.step == "extract"
    first = 1 if ctx.step == "save" else 2  # the turn that saves
    if reading and ctx.turn == 1:
        part = int(ctx.step.removeprefix("read_")) if ctx.step != "extract" else 0
        return call("read_documents", doc_ids=extract_part(doc_ids, part) if part else doc_ids)
    kind, arg = _model_fault(ctx)
    if saving and ctx.turn == first and kind == "outage" and world.model_outage_hit(
            f"{ctx.input.get('batch_id')}:{ctx.input.get('batch')}", int(arg or 2)):
        return ServerError("server_error: HTTP 503 (demo model outage)")
    if saving and ctx.turn == first:
        docs = [d for f in _facts(ctx) for d in f.get("docs", ())]
        return call("save_fields", records=[_fields(d) for d in docs])
    return say(f"{ctx.step} done" if ctx.step != "extract" else "batch extracted")


def _fields(doc: dict[str, Any]) -> dict[str, Any]:
    """Return the fields a careful reader finds in an invoice's text."""
    parts = dict(p.split(": ", 1) for p in doc["text"].split(" | ")[1:])
    return {"doc_id": doc["id"], "vendor": parts.get("vendor", ""),
            "total": parts.get("total", "").removesuffix(" EUR")}
