import pytest
from tests.console_factories import make_approval, make_attention_run, make_role_users, make_intervention
from tests.e2e.test_lists import _login

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

def test_shots(browser, live_server):
    users = make_role_users()
    run = make_attention_run(goal="Refund order 42")
    make_approval(make_attention_run("waiting", goal="Refund A-2002"), tool="refund", args={"amount": 250, "order": "A-2002"})
    make_intervention(actor=users["admin"], run=run)
    context, page = _login(browser, live_server, "admin", color_scheme="dark")
    for name, path in [("inbox", "/approvals/"), ("audit", "/audit/"), ("settings", "/settings/"), ("world", "/world/"), ("bulk", f"/bulk/?tab=blocked&all=1"), ("confirm", f"/runs/{run.pk}/actions/retry/")]:
        page.goto(live_server.url + path)
        page.screenshot(path=f"/tmp/dark_{name}.png", full_page=True)
    context.close()
