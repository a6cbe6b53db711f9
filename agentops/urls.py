"""URL routes: the console, the API and health checks."""
from django.contrib import admin
from django.urls import include, path

from agentops import health
from agentops.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    path("", include("runs.urls")),
]

handler403 = "runs.views._common.forbidden"
