"""Fixtures of the API tests: users in each role, their API keys, authenticated clients."""
from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from approvals.apikeys import apikey_create


class ApiClient(Client):
    """A test client that sends one user's API key and speaks JSON."""

    def __init__(self, key: str | None, user: User | None = None) -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        super().__init__(headers=headers)
        self.user = user
        self.key = key

    def post_json(self, path: str, body: object, **extra: object):
        """POST ``body`` as JSON."""
        return self.post(path, body, content_type="application/json", **extra)

    def patch_json(self, path: str, body: object):
        """PATCH ``body`` as JSON."""
        return self.patch(path, body, content_type="application/json")

    def put_json(self, path: str, body: object):
        """PUT ``body`` as JSON."""
        return self.put(path, body, content_type="application/json")


@pytest.fixture
def make_user(db) -> Callable[..., User]:
    """Return a builder of active users holding the given role groups."""

    def build(name: str, *roles: str) -> User:
        user = User.objects.create_user(username=name, password="pw-for-tests-only")
        for role in roles:
            user.groups.add(Group.objects.get(name=role))
        return user

    return build


@pytest.fixture
def client_for(make_user) -> Callable[..., ApiClient]:
    """Return a builder of API clients authenticated by a new key of a user in ``roles``.

    The key is in the default team with the user's highest role (roles are groups here:
    installation-wide, so held in every team).
    """

    def build(*roles: str, name: str | None = None) -> ApiClient:
        user = make_user(name or "-".join(roles) or "nobody", *roles)
        if not roles:
            # Nobody may hold a key above their own role, so a person without one has no
            # key: they call through a console session (and meet the same role checks).
            client = ApiClient(None, user)
            client.force_login(user)
            return client
        _, raw = apikey_create(user=user, name="tests")
        return ApiClient(raw, user)

    return build


@pytest.fixture
def viewer(client_for) -> ApiClient:
    """A client of a user in the viewers group."""
    return client_for("viewers")


@pytest.fixture
def operator(client_for) -> ApiClient:
    """A client of a user in the operators group."""
    return client_for("operators")


@pytest.fixture
def support(client_for) -> ApiClient:
    """A client of a user in the support group."""
    return client_for("support")


@pytest.fixture
def admin(client_for) -> ApiClient:
    """A client of a user in the admins group."""
    return client_for("admins")


@pytest.fixture
def anonymous(db) -> ApiClient:
    """A client without credentials."""
    return ApiClient(None)


def assert_error(response, status: int, code: str | None = None) -> dict:
    """Assert the response is the shared error shape with ``status`` (and ``code``)."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert "Traceback" not in response.content.decode()
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    """Start every test with empty rate-limit histories (they live in the cache)."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def agent(settings):
    """A registered one-step agent (its model is never called: ticks are not enqueued)."""
    from agentops.agents import Agent, StepSpec, registry

    settings.AGENTOPS_ENQUEUE_TICKS = False
    definition = Agent(name="api-test-agent", version="1", system_prompt="test", tools=[],
                       plan=[StepSpec("main")], model=lambda: None)
    registry.register(definition)
    yield definition
    registry._agents.pop((definition.name, definition.version), None)
    registry._latest.pop(definition.name, None)
