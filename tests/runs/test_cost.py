"""Cost: the price table (settings + admin page), the cost of every reply, cost budgets."""
from __future__ import annotations

import pytest
from django.urls import reverse

from agentops.llm.protocol import ModelReply, Usage
from agentops.pricing import prices_from_setting
from approvals.models import Intervention
from runs.engine.runtime.prices import prices_forget
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users
from tests.engine_agents import call, say

pytestmark = pytest.mark.django_db

# The scripted model reports 50 prompt + 10 completion tokens per reply.
IN_PRICE, OUT_PRICE = 10_000_000, 30_000_000  # $10 and $30 per million tokens
PER_REPLY = (50 * IN_PRICE + 10 * OUT_PRICE) // 1_000_000  # 800 micro-dollars


@pytest.fixture(autouse=True)
def _fresh_prices():
    """Each test starts (and leaves) with no cached price table."""
    prices_forget()
    yield
    prices_forget()


def _admin_sets_price(model: str) -> None:
    admin = make_role_users()["admin"]
    response = client_for(admin).post(reverse("console:settings_new", args=["price"]), {
        "model": model, "input_per_mtok_micros": IN_PRICE, "output_per_mtok_micros": OUT_PRICE})
    assert response.status_code == 302, response.content.decode()[:500]


def test_a_price_set_on_the_settings_page_costs_every_reply(engine):
    _admin_sets_price("*")
    engine.make_agent("costed", {"work": [call("lookup", item="a"), say("done")]}, plan=["work"])
    run = run_start(agent="costed", goal="cost me")
    assert drive(run) == "succeeded"
    assert run.cost_micros == 2 * PER_REPLY and run.model_calls == 2
    audit = Intervention.objects.get(action="settings.model_price")
    assert audit.data["target"] == "*"

    from django.contrib.auth.models import User

    admin = User.objects.get(username="admin")
    detail = client_for(admin).get(reverse("console:run", args=[run.pk])).content.decode()
    assert "$0.0016" in detail  # the run's cost meter
    page = client_for(admin).get(reverse("console:settings")).content.decode()
    spend = page[page.index('id="spend"'):]
    assert "costed" in spend and "$0.0016" in spend


def test_a_run_over_its_cost_budget_blocks_with_budget_exhausted(engine):
    _admin_sets_price("*")
    script = {"work": [call("lookup", item=str(i)) for i in range(5)] + [say("done")]}
    engine.make_agent("spender", script, plan=["work"])
    run = run_start(agent="spender", goal="spend", budget={"cost_micros": 2 * PER_REPLY})
    assert drive(run) == "blocked"
    assert run.attention_reason == "budget_exhausted"
    assert run.cost_micros == 2 * PER_REPLY and run.model_calls == 2
    assert "cost: used 1600 of 1600" in run.attention_detail


def test_the_setting_prices_models_and_a_provider_figure_wins(engine, settings):
    settings.AGENTOPS_MODEL_PRICES = prices_from_setting(
        '{"*": {"input": 10, "output": 30}}')
    provider = ModelReply(text="done", usage=Usage(50, 10, cost_micros=7), finish_reason="stop")
    engine.make_agent("reported2", {"work": [provider]}, plan=["work"])
    run = run_start(agent="reported2", goal="provider says 7")
    assert drive(run) == "succeeded" and run.cost_micros == 7
    engine.make_agent("priced", {"work": [say("done")]}, plan=["work"])
    run = run_start(agent="priced", goal="setting says 800")
    assert drive(run) == "succeeded" and run.cost_micros == PER_REPLY


@pytest.mark.parametrize("raw, message", [
    ("{", "AGENTOPS_MODEL_PRICES is not JSON"),
    ('{"gpt": {"input": 1}}', "AGENTOPS_MODEL_PRICES['gpt'] must be"),
    ('{"gpt": {"input": -1, "output": 1}}', "with numbers >= 0"),
    ("[1]", "must be a JSON object"),
])
def test_a_bad_price_setting_says_what_is_wrong(raw, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        prices_from_setting(raw)


def test_a_negative_price_is_refused_on_the_page():
    admin = make_role_users()["admin"]
    response = client_for(admin).post(reverse("console:settings_new", args=["price"]), {
        "model": "gpt", "input_per_mtok_micros": -1, "output_per_mtok_micros": 1})
    assert response.status_code == 422 and "Must be zero or above" in response.content.decode()
