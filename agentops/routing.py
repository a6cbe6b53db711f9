"""Websocket routes of the console (mounted by agentops.asgi under AuthMiddlewareStack)."""
from django.urls import path

from runs.consumers import QueueConsumer, RunConsumer

websocket_urlpatterns = [
    path("ws/runs/<uuid:run_id>/", RunConsumer.as_asgi()),
    path("ws/queue/", QueueConsumer.as_asgi()),
]
