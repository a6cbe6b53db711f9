"""URL routes: the console, the API and health checks."""
from django.contrib import admin
from django.urls import include, path

from agentops.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("", include("runs.urls")),
]
