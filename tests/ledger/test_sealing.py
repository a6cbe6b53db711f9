"""Sealed arguments: their own key ring, rotation, and keyed redaction markers."""
from __future__ import annotations

import hashlib

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError

from agentops.redaction import marker
from approvals.models import Approval
from approvals.services import approval_decide
from ledger.models import ToolCall
from ledger.sealed import seal, unseal
from agentops.jsonstate import canonical_json
from runs.services import run_start
from tests import secret_agents
from tests.conftest import drive
from tests.console_factories import make_role_users

pytestmark = pytest.mark.django_db
PIN = "731946"


@pytest.fixture
def users(db):
    """One user per role plus 'nobody' without a role."""
    return make_role_users()


@pytest.fixture
def waiting(engine, settings, users):
    """A run waiting for approval of an unlock whose PIN is sealed under seal key k1."""
    settings.AGENTOPS_SEAL_KEYS = [Fernet.generate_key().decode()]
    secret_agents.received.clear()
    secret_agents.pin_agent("sealer", PIN)
    run = run_start(agent="sealer", goal="open the door")
    assert drive(run) == "waiting"
    return run


def _approve_and_finish(run, users) -> None:
    approval = Approval.objects.get(run=run, status="pending")
    approval_decide(approval=approval, user=users["support"], approve=True)
    assert drive(run) == "succeeded"


def test_rotating_secret_key_keeps_waiting_runs_sealed_arguments_readable(waiting, settings,
                                                                          users):
    settings.SECRET_KEY = "a-brand-new-secret-key-" + "x" * 40
    settings.SECRET_KEY_FALLBACKS = []
    _approve_and_finish(waiting, users)
    assert {"tool": "unlock", "door": "d1", "pin": PIN} in secret_agents.received


def test_rotate_keys_reseals_so_the_old_seal_key_can_be_dropped(waiting, settings, users):
    old = settings.AGENTOPS_SEAL_KEYS[0]
    new = Fernet.generate_key().decode()
    settings.AGENTOPS_SEAL_KEYS = [new, old]
    call_command("agentops", "rotate-keys")
    settings.AGENTOPS_SEAL_KEYS = [new]
    sealed = ToolCall.objects.get(run=waiting, tool="unlock").sealed_args
    assert Fernet(new.encode()).decrypt(sealed.encode())  # sealed with the new key now
    _approve_and_finish(waiting, users)
    assert {"tool": "unlock", "door": "d1", "pin": PIN} in secret_agents.received


def test_rotate_keys_names_what_no_key_opens(waiting, settings):
    settings.AGENTOPS_SEAL_KEYS = [Fernet.generate_key().decode()]
    settings.SECRET_KEY = "another-secret-key-" + "y" * 40
    with pytest.raises(CommandError, match="could not be opened"):
        call_command("agentops", "rotate-keys")


def test_values_sealed_before_seal_keys_existed_still_open_after_secret_key_moves(settings):
    settings.AGENTOPS_SEAL_KEYS = []
    token = seal({"pin": PIN})  # sealed with the key derived from SECRET_KEY (old installs)
    settings.AGENTOPS_SEAL_KEYS = [Fernet.generate_key().decode()]
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "rotated-secret-key-" + "z" * 40
    assert unseal(token) == {"pin": PIN}


def test_the_marker_of_a_pin_cannot_be_found_by_hashing_every_pin(settings):
    """The old marker was sha256(canonical json)[:12]: 10**6 hashes recovered any PIN."""
    settings.AGENTOPS_REDACTION_KEY = "k" * 64
    mark = marker(PIN)
    unsalted = hashlib.sha256(canonical_json(PIN).encode()).hexdigest()
    assert unsalted[:12] not in mark and hashlib.sha256(PIN.encode()).hexdigest()[:12] not in mark
    assert mark == marker(PIN)  # stable: two redacted values can still be compared
    settings.AGENTOPS_REDACTION_KEY = "j" * 64
    assert marker(PIN) != mark  # and it depends on the key


def test_the_ledger_and_the_approval_hold_only_the_keyed_marker(waiting, settings):
    row = ToolCall.objects.get(run=waiting, tool="unlock")
    approval = Approval.objects.get(run=waiting)
    assert row.args["pin"] == marker(PIN) == approval.proposed_args["pin"]
    assert PIN not in str(row.args) and PIN not in row.sealed_args


def test_an_edited_sensitive_argument_is_sealed_and_used_not_stored(waiting, users):
    approval = Approval.objects.get(run=waiting, status="pending")
    approval_decide(approval=approval, user=users["support"], approve=True,
                    edited_args={"door": "d1", "pin": "864209"})
    row = ToolCall.objects.get(run=waiting, tool="unlock")
    approval.refresh_from_db()
    assert "864209" not in str(row.approved_args) and "864209" not in str(approval.approved_args)
    assert drive(waiting) == "succeeded"
    assert {"tool": "unlock", "door": "d1", "pin": "864209"} in secret_agents.received
