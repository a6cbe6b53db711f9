"""Settings of the test OpenID provider: django-oauth-toolkit with OpenID Connect on, in its
own Django project and SQLite file, started by tests/e2e/test_sso.py as a second process.

OIDC_PROVIDER_DB is the SQLite file; OIDC_PROVIDER_KEY the PEM file of its RSA signing key.
"""
import os
from pathlib import Path

DEBUG = True
SECRET_KEY = "test-provider-only"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
    "tests.oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.oidc_provider.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
              "OPTIONS": {"context_processors": ["django.template.context_processors.request"]}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                         "NAME": os.environ.get("OIDC_PROVIDER_DB", ":memory:")}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # test users only
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# AgentOps runs on the same loopback address: its cookies must not overwrite these.
SESSION_COOKIE_NAME = "provider_sessionid"
CSRF_COOKIE_NAME = "provider_csrftoken"

_key = os.environ.get("OIDC_PROVIDER_KEY", "")
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(_key).read_text() if _key else "",
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validator.GroupsValidator",
    "SCOPES": {"openid": "OpenID Connect", "email": "Email", "profile": "Profile and groups"},
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "ID_TOKEN_EXPIRE_SECONDS": 300,
}
