"""agentops.writes.row_new: the same model instance as the model's own constructor."""
import pytest
from django.db.models.signals import post_init

from agentops import clock
from agentops.writes import row_new
from ledger.models import ToolAttempt, ToolCall
from runs.models import Run

_RUN_ID = "123e4567-e89b-12d3-a456-426614174000"


def _fields(obj):
    return {k: v for k, v in obj.__dict__.items() if k != "_state"}


def _call(make):
    return make(ToolCall, tool_call_id="tc_x", provider_call_id="p", run_id=_RUN_ID,
                step_key="s", turn=3, tool="noop", args={"i": 1}, args_hash="h",
                idempotency_key="k", idempotent=False, sealed_args="", generation=1)


def _django(model, **values):
    return model(**values)


def test_a_row_has_the_fields_and_state_of_the_constructors_in_field_order():
    ours, theirs = _call(row_new), _call(_django)
    assert list(ours.__dict__) == list(theirs.__dict__)
    assert _fields(ours) == _fields(theirs)
    assert ours._state.adding and ours._state.db is None
    # A callable default is called per row: two rows never share a mutable default.
    a, b = row_new(ToolCall, tool_call_id="a"), row_new(ToolCall, tool_call_id="b")
    assert a.missing_fields == [] and a.missing_fields is not b.missing_fields


@pytest.mark.django_db
def test_a_related_row_given_by_name_goes_through_its_descriptor():
    call, now = _call(row_new), clock.now()
    ours = row_new(ToolAttempt, tool_call=call, attempt=1, status="running", worker="w",
                   started_at=now)
    theirs = ToolAttempt(tool_call=call, attempt=1, status="running", worker="w",
                         started_at=now)
    assert _fields(ours) == _fields(theirs)
    assert ours.tool_call is call
    assert ours._state.db == theirs._state.db
    with pytest.raises(ValueError):
        row_new(ToolAttempt, tool_call=Run(), attempt=1)


def test_anything_else_takes_the_constructor():
    with pytest.raises(TypeError, match="unexpected keyword"):
        row_new(ToolCall, no_such_field=1)
    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(receiver, sender=ToolCall)
    try:
        row = row_new(ToolCall, tool_call_id="tc_y")
    finally:
        post_init.disconnect(receiver, sender=ToolCall)
    assert seen == [row]


class _Router:
    """A router naming its own database for writes and refusing relations when told."""

    refuse = False

    def db_for_write(self, model, **hints):
        return "routed"

    def allow_relation(self, obj1, obj2, **hints):
        return not self.refuse


@pytest.mark.parametrize("refuse", [False, True])
def test_a_related_row_is_routed_and_allowed_by_the_router_as_by_its_descriptor(settings, refuse):
    router = _Router()
    router.refuse = refuse
    settings.DATABASE_ROUTERS = [router]
    values = {"attempt": 1, "status": "running", "worker": "w"}
    if refuse:
        for make in (row_new, _django):
            with pytest.raises(ValueError, match="router prevents this relation"):
                make(ToolAttempt, tool_call=_call(row_new), **values)
        return
    ours_call, theirs_call = _call(row_new), _call(row_new)
    ours = row_new(ToolAttempt, tool_call=ours_call, **values)
    theirs = ToolAttempt(tool_call=theirs_call, **values)
    assert ours._state.db == theirs._state.db == "routed"
    assert ours_call._state.db == theirs_call._state.db == "routed"
    assert _fields(ours) == _fields(theirs) and ours.tool_call is ours_call
