"""URL routes for the observability and security tests: health, metrics, a login, a page."""
from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.http import HttpResponse
from django.urls import include, path
from django.views.decorators.http import require_GET

from agentops import health


@require_GET
def _page(request):
    return HttpResponse("<!doctype html><title>page</title><p>ok</p>")


urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    path("login/", LoginView.as_view(template_name="admin/login.html"), name="login"),
    path("page/", _page, name="page"),
    path("admin/", admin.site.urls),
    # The console's namespace, so LOGIN_REDIRECT_URL ("console:queue") resolves after a login.
    path("console/", include("runs.urls")),
]
