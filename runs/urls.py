"""Console URL routes (app_name "console")."""
from django.urls import path

from runs.views import (actions, admin_pages, decision_links, detail, history, inbox, lists,
                        queue, signin, trace, world)

app_name = "console"
urlpatterns = [
    path("", queue.queue, name="queue"),
    path("bulk/", queue.bulk, name="bulk"),
    path("views/", lists.saved_view_save, name="saved_view_save"),
    path("views/<int:view_id>/delete/", lists.saved_view_remove, name="saved_view_remove"),
    path("theme/", lists.theme_set, name="theme"),
    path("runs/<uuid:run_id>/", detail.run_page, name="run"),
    path("runs/<uuid:run_id>/events/", detail.run_events, name="run_events"),
    path("runs/<uuid:run_id>/history/", history.run_history, name="run_history"),
    path("runs/<uuid:run_id>/trace/", trace.run_trace_page, name="run_trace"),
    path("runs/<uuid:run_id>/ledger/", detail.run_ledger, name="run_ledger"),
    path("runs/<uuid:run_id>/context/", actions.run_context, name="run_context"),
    path("runs/<uuid:run_id>/fork/", actions.run_fork, name="run_fork"),
    path("runs/<uuid:run_id>/artifacts/<str:sha256>/", actions.run_artifact,
         name="run_artifact"),
    path("runs/<uuid:run_id>/actions/<str:verb>/", actions.run_action, name="run_action"),
    path("approvals/", inbox.inbox, name="inbox"),
    path("approvals/<int:approval_id>/diff/", inbox.approval_diff, name="approval_diff"),
    path("approvals/<int:approval_id>/<str:verb>/", inbox.approval_decide,
         name="approval_decide"),
    path("decide/<str:token>/", decision_links.decision_link, name="decision_link"),
    path("integrations/slack/interactions/", decision_links.slack_interactions,
         name="slack_interactions"),
    path("settings/", admin_pages.settings_page, name="settings"),
    path("settings/<str:kind>/new/", admin_pages.settings_edit, name="settings_new"),
    path("settings/<str:kind>/<int:pk>/", admin_pages.settings_edit, name="settings_edit"),
    path("audit/", admin_pages.audit, name="audit"),
    path("world/", world.world_page, name="world"),
    path("login/", signin.SignInView.as_view(), name="login"),
    path("logout/", signin.sign_out, name="logout"),
    path("oidc/authenticate/", signin.SsoStart.as_view(), name="oidc_start"),
    path("oidc/callback/", signin.SsoCallback.as_view(), name="oidc_callback"),
]
