"""The demo agents' tools. Each records what it does to the world in agentops.demo.world."""
from __future__ import annotations

from typing import Any

from agentops.demo import world
from agentops.demo.models import WorldEffect
from agentops.tools import ToolContext, ToolResult, WaitForChildren, tool
from ledger.artifacts import artifact_put
from runs.models import Run

APPROVE_REFUNDS_OVER = 100


# --- support returns -------------------------------------------------------------------------

@tool(effect="read")
def get_order(ctx: ToolContext, order_id: str) -> ToolResult:
    """Look up an order: item, amount, customer email, days since delivery."""
    world.fault_before(ctx, "get_order")
    order = world.order_get(order_id)
    return ToolResult(facts=order, summary=f"order {order_id}: {order['item']}, {order['amount']} EUR")


@tool(effect="read")
def check_return_policy(ctx: ToolContext, order_id: str) -> ToolResult:
    """Check whether an order may still be returned (30 days from delivery)."""
    world.fault_before(ctx, "check_return_policy")
    days = world.order_get(order_id)["days_since_delivery"]
    eligible = days <= 30
    return ToolResult(facts={"order_id": order_id, "eligible": eligible, "days": days},
                      summary=f"{'eligible' if eligible else 'not eligible'}: delivered {days} days ago")


@tool(effect="read")
def track_logistics(ctx: ToolContext, order_id: str) -> ToolResult:
    """Ask the carrier where the order is (the carrier's API is rate-limited)."""
    world.fault_before(ctx, "track_logistics")
    return ToolResult(facts={"order_id": order_id, "carrier": "ParcelCo", "status": "delivered"},
                      summary=f"{order_id} was delivered by ParcelCo")


def _refund_probe(ctx: ToolContext, order_id: str, amount: float) -> ToolResult | None:
    found = world.effect_find(kind="refund", key=ctx.idempotency_key)
    if found is None:
        return None
    return ToolResult(facts=found.data, summary=f"refund {found.data['refund_id']} exists (probed)")


def _refund_undo(ctx: ToolContext, facts: dict[str, Any], order_id: str, amount: float) -> ToolResult:
    world.effect_record(kind="refund.reversed", key=ctx.idempotency_key, run_id=ctx.run_id,
                        data={"refund_id": facts.get("refund_id"), "amount": amount},
                        idempotent=True)
    return ToolResult(facts={"reversed": facts.get("refund_id")}, summary="refund reversed")


def _refund_needs_approval(args: dict[str, Any]) -> str | None:
    amount = args.get("amount") or 0
    if amount > APPROVE_REFUNDS_OVER:
        return f"refund of {amount} EUR is over the {APPROVE_REFUNDS_OVER} EUR approval limit"
    return None


@tool(effect="write", idempotent=True, probe=_refund_probe, compensate=_refund_undo,
      reversibility="reversible", approval="policy", approval_policy=_refund_needs_approval,
      parameters={"type": "object", "additionalProperties": False, "required": ["order_id", "amount"],
                  "properties": {"order_id": {"type": "string"},
                                 "amount": {"type": "number", "minimum": 0}}})
def issue_refund(ctx: ToolContext, order_id: str, amount: float) -> ToolResult:
    """Refund an order's amount to the customer (idempotent; refunds over 100 EUR need approval)."""
    world.fault_before(ctx, "issue_refund")
    refund = {"refund_id": f"rf_{ctx.idempotency_key[:12]}", "order_id": order_id, "amount": amount}
    effect, _ = world.effect_record(kind="refund", key=ctx.idempotency_key, run_id=ctx.run_id,
                                    data=refund, idempotent=True)
    world.fault_after(ctx, "issue_refund")
    return ToolResult(facts=effect.data, summary=f"refunded {amount} EUR for {order_id}")


@tool(effect="write", idempotent=True, reversibility="manual")
def create_return_label(ctx: ToolContext, order_id: str) -> ToolResult:
    """Create a prepaid return label for an order (idempotent)."""
    world.fault_before(ctx, "create_return_label")
    label = {"label_id": f"lbl_{ctx.idempotency_key[:12]}", "order_id": order_id}
    effect, _ = world.effect_record(kind="return_label", key=ctx.idempotency_key,
                                    run_id=ctx.run_id, data=label, idempotent=True)
    world.fault_after(ctx, "create_return_label")
    return ToolResult(facts=effect.data, summary=f"return label {label['label_id']} created")


@tool(effect="write", reversibility="irreversible")
def send_customer_email(ctx: ToolContext, to: str, subject: str, body: str) -> ToolResult:
    """Email the customer (no idempotency key and no way to check it was sent)."""
    world.fault_before(ctx, "send_customer_email")
    world.effect_record(kind="email", key=ctx.idempotency_key, run_id=ctx.run_id,
                        data={"to": to, "subject": subject}, idempotent=False)
    world.fault_after(ctx, "send_customer_email")
    return ToolResult(facts={"sent_to": to}, summary=f"emailed {to}: {subject}")


# --- sales report ----------------------------------------------------------------------------

@tool(effect="read", parameters={
    "type": "object", "additionalProperties": False, "required": ["region"],
    "properties": {"region": {"type": "string", "enum": list(world.REGIONS)}}})
def query_sales(ctx: ToolContext, region: str) -> ToolResult:
    """Query one region's quarterly sales (total revenue and order count)."""
    world.fault_before(ctx, f"query_sales:{region}")
    world.fault_before(ctx, "query_sales")
    sales = world.region_sales(region)
    return ToolResult(facts=sales, summary=f"{region}: {sales['total']} EUR over {sales['orders']} orders")


@tool(effect="write", idempotent=True, reversibility="manual", parameters={
    "type": "object", "additionalProperties": False, "required": ["title", "totals"],
    "properties": {"title": {"type": "string"}, "totals": {"type": "object"}}})
def write_report(ctx: ToolContext, title: str, totals: dict[str, Any]) -> ToolResult:
    """Write the sales report (stored as an artifact; its sha256 is in the facts)."""
    world.fault_before(ctx, "write_report")
    lines = [f"# {title}", "", "| region | total (EUR) |", "|---|---|"]
    lines += [f"| {region} | {total} |" for region, total in sorted(totals.items())]
    data = "\n".join(lines).encode()
    sha = artifact_put(data, content_type="text/markdown")
    world.effect_record(kind="report", key=ctx.idempotency_key, run_id=ctx.run_id,
                        data={"sha256": sha, "regions": sorted(totals)}, idempotent=True)
    return ToolResult(facts={"report_sha256": sha, "bytes": len(data), "regions": len(totals)},
                      summary=f"report written ({len(totals)} regions, {len(data)} bytes)")


# --- document batch --------------------------------------------------------------------------

@tool(effect="read")
def list_documents(ctx: ToolContext, count: int) -> ToolResult:
    """List the documents waiting for field extraction."""
    world.fault_before(ctx, "list_documents")
    return ToolResult(facts={"count": count, "first": "doc-0001", "last": f"doc-{count:04d}"},
                      summary=f"{count} documents wait for extraction")


@tool(effect="read")
def extract_in_children(ctx: ToolContext, count: int, batch_size: int, wave: int = 1,
                        waves: int = 1) -> ToolResult:
    """Fan the documents out to child runs (one per batch) and wait until all have ended.

    With ``waves`` > 1 this call starts only wave ``wave`` of that many consecutive groups of
    batches: fewer children queued at once, so other runs get a worker between waves.
    """
    faults = world.faults_for(ctx.run_id)
    outage = world.fault_of(faults, "model_outage")
    down = {int(b) for b in (outage[1] or "").split("+") if b.isdigit()}
    ids = [f"doc-{i:04d}" for i in range(1, max(count, 0) + 1)]
    size = max(batch_size, 1)
    starts = list(range(0, len(ids), size))
    per_wave = -(-len(starts) // max(waves, 1))
    children = []
    for n, start in enumerate(starts, start=1):
        if (n - 1) // per_wave != wave - 1:
            continue
        child_input: dict[str, Any] = {"batch_id": ctx.run_id, "batch": n,
                                       "doc_ids": ids[start:start + size]}
        # A slow document store set on the batch slows every child's reads too.
        child_faults = {k: _staggered(v, n) for k, v in faults.items() if k == "read_documents"}
        if n in down:
            child_faults["model"] = f"outage:{outage[0] or 2}"
        if child_faults:
            child_input["faults"] = child_faults
        children.append({"agent": "document-extract", "goal": f"extract batch {n}",
                         "input": child_input})
    if not children:  # fewer batches than waves
        return ToolResult(facts={"wave": wave, "children": 0}, summary=f"wave {wave}: no batch")
    raise WaitForChildren(children, timeout_s=3600)


def _staggered(fault: str, n: int) -> str:
    """Return child ``n``'s share of a ``slow:S`` fault: 0.75 S when odd, 1.25 S when even,
    so children run side by side end one at a time, not in pairs."""
    kind, _, arg = fault.partition(":")
    if kind != "slow":
        return fault
    return f"slow:{float(arg or 1) * (0.75 if n % 2 else 1.25):g}"


@tool(effect="read", parameters={
    "type": "object", "additionalProperties": False, "required": ["doc_ids"],
    "properties": {"doc_ids": {"type": "array", "items": {"type": "string"}}}})
def read_documents(ctx: ToolContext, doc_ids: list[str]) -> ToolResult:
    """Read the text of documents."""
    world.fault_before(ctx, "read_documents")
    docs = [{"id": d, "text": world.document_text(d)} for d in doc_ids]
    return ToolResult(facts={"docs": docs}, summary=f"read {len(docs)} documents")


@tool(effect="write", idempotent=True, reversibility="manual", parameters={
    "type": "object", "additionalProperties": False, "required": ["records"],
    "properties": {"records": {"type": "array", "items": {"type": "object"}}}})
def save_fields(ctx: ToolContext, records: list[dict[str, Any]]) -> ToolResult:
    """Save the extracted fields of documents (idempotent per document)."""
    world.fault_before(ctx, "save_fields")
    batch = _batch_of(ctx.run_id)
    for rec in records:
        doc = str(rec.get("doc_id", ""))
        world.effect_record(kind="document.fields", key=f"{ctx.idempotency_key}:{doc}",
                            run_id=ctx.run_id, data={**rec, "batch_id": batch}, idempotent=True)
    return ToolResult(facts={"saved": len(records)}, summary=f"saved fields of {len(records)} documents")


@tool(effect="read")
def summarize_batch(ctx: ToolContext, count: int) -> ToolResult:
    """Count the documents whose fields were saved by this batch's child runs."""
    saved = WorldEffect.objects.filter(kind="document.fields", data__batch_id=ctx.run_id).count()
    return ToolResult(facts={"expected": count, "saved": saved, "missing": max(count - saved, 0)},
                      summary=f"{saved} of {count} documents have their fields saved")


def _batch_of(run_id: str) -> str:
    data = Run.objects.filter(pk=run_id).values_list("input", flat=True).first() or {}
    return str(data.get("batch_id", "")) if isinstance(data, dict) else ""
