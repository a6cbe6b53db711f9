"""The channel declaration: a bad one stops start-up naming the channel and the field."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from approvals.notify.declared import ChannelDeclarationError, channels_from_setting


@pytest.mark.parametrize(("raw", "says"), [
    ("{not json", "is not JSON"),
    ("[]", "must be a JSON object"),
    ('{"m": {"kind": "fax"}}', "AGENTOPS_NOTIFY_CHANNELS['m'].kind must be one of email, slack"),
    ('{"c": {"kind": "slack"}}', "['c'].url must be an http(s) URL for a slack channel"),
    ('{"h": {"kind": "webhook", "url": "https://x", "secret": "short"}}',
     "['h'].secret must be a string of at least 16"),
    ('{"m": {"kind": "email", "to": "x"}}', "['m'] has unknown keys: to"),
])
def test_a_bad_declaration_says_what_is_wrong(raw, says):
    with pytest.raises(ChannelDeclarationError) as err:
        channels_from_setting(raw)
    assert says in str(err.value)


def test_none_declared_is_console_only_and_a_good_one_reads_back():
    assert channels_from_setting("") == {}
    assert channels_from_setting('{"m": {"kind": "email"}}') == {
        "m": {"kind": "email", "url": "", "secret": ""}}


def test_the_settings_refuse_a_bad_declaration_at_start_up():
    env = {**os.environ, "AGENTOPS_NOTIFY_CHANNELS": '{"m": {"kind": "fax"}}',
           "DJANGO_SETTINGS_MODULE": "agentops.settings"}
    out = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "AGENTOPS_NOTIFY_CHANNELS['m'].kind" in out.stderr
