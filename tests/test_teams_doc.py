"""Every command in docs/teams.md runs as written: the CLI lines, then the API calls."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from django.core.management import call_command

from approvals.apikeys import apikey_create
from approvals.models import Membership, NotifyRule
from ledger.models import ToolLimit
from runs.models import BudgetPolicy, Team
from tests.api.conftest import ApiClient
from tests.console_factories import make_user

pytestmark = pytest.mark.django_db
DOC = Path(__file__).resolve().parent.parent / "docs" / "teams.md"


def _commands() -> list[list[str]]:
    """Return each shell command of the doc's ``sh`` blocks, split as the shell would."""
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(), flags=re.S)
    commands, pending = [], ""
    for line in "\n".join(blocks).splitlines():
        if not pending and (not line.strip() or line.startswith("#")):
            continue
        pending += line[:-1] if line.endswith("\\") else line + "\n"
        if line.endswith("\\"):
            continue
        try:
            commands.append(shlex.split(pending))
        except ValueError:  # a quote still open: the command goes on
            continue
        pending = ""
    return commands


def _curl(api: ApiClient, argv: list[str]):
    method = argv[argv.index("-X") + 1] if "-X" in argv else "GET"
    body = argv[argv.index("-d") + 1] if "-d" in argv else None
    url = next(a for a in argv if a.startswith("http://localhost:8000"))
    path = url.removeprefix("http://localhost:8000")
    if body is None:
        return getattr(api, method.lower())(path)
    return api.generic(method, path, json.dumps(json.loads(body)), "application/json")


def test_the_cli_and_api_examples_run(settings):
    settings.AGENTOPS_NOTIFY_CHANNELS = {"mail": {"kind": "email", "url": "", "secret": ""}}
    commands = _commands()
    assert len(commands) >= 9
    for argv in (c for c in commands if c[:3] == ["python", "manage.py", "agentops"]):
        call_command(*argv[2:])
    assert Membership.objects.get(user__username="alice", team__slug="payments").role == \
        "operators"
    call_command("agentops", "createteam", "support-desk")
    make_user("bob")
    root = make_user("root-api", "admins")
    keys = {var: ApiClient(apikey_create(user=root, name=var, team=Team.objects.get(slug=slug))[1],
                           root)
            for var, slug in (("$PAYMENTS_KEY", "payments"), ("$DESK_KEY", "support-desk"))}
    for argv in (c for c in commands if c[0] == "curl"):
        key = next(v for v in keys if f"Authorization: Bearer {v}" in argv)
        response = _curl(keys[key], argv)
        assert response.status_code in (200, 201, 204), (argv, response.content)
    assert not Membership.objects.filter(user__username="bob").exists()  # added, then removed
    assert BudgetPolicy.objects.get(team__slug="payments").max_cost_micros == 5_000_000
    assert ToolLimit.objects.get(team__slug="payments", tool="issue_refund").concurrency == 2
    assert NotifyRule.objects.get(name="refunds").team.slug == "support-desk"
