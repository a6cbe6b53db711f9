"""Fixtures shared by the runs tests."""
import pytest

from tests.console_factories import make_role_users


@pytest.fixture
def users():
    """One user per role plus 'nobody' without a role."""
    return make_role_users()
