"""agentops.hot_settings: a setting read through it follows every announced change."""
from django.test import override_settings

from agentops.hot_settings import hot_setting


def test_a_hot_setting_follows_the_settings_fixture_and_override_settings(settings):
    settings.AGENTOPS_READ_RIDE_MS = 7
    assert hot_setting("AGENTOPS_READ_RIDE_MS") == 7
    settings.AGENTOPS_READ_RIDE_MS = 9  # read before: forgotten on the change
    assert hot_setting("AGENTOPS_READ_RIDE_MS") == 9
    with override_settings(AGENTOPS_READ_RIDE_MS=11):
        assert hot_setting("AGENTOPS_READ_RIDE_MS") == 11
    assert hot_setting("AGENTOPS_READ_RIDE_MS") == 9
