"""The test settings: a fast password hasher, only under AGENTOPS_ENV=test."""
from __future__ import annotations

import os
import subprocess
import sys

from django.conf import settings
from django.contrib.auth.hashers import make_password


def test_tests_hash_passwords_with_the_fast_hasher():
    assert settings.PASSWORD_HASHERS == ["django.contrib.auth.hashers.MD5PasswordHasher"]
    assert make_password("s3cret-pass").startswith("md5$")


def test_outside_tests_passwords_keep_django_s_slow_hasher():
    env = {k: v for k, v in os.environ.items() if k != "AGENTOPS_ENV"}
    env["AGENTOPS_ENV"] = "dev"
    code = ("import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', "
            "'agentops.settings'); django.setup(); from django.conf import settings; "
            "print(settings.PASSWORD_HASHERS[0])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert "PBKDF2PasswordHasher" in out
