"""WSGI entry point (the ASGI one is preferred: it serves live updates too)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")
application = get_wsgi_application()
